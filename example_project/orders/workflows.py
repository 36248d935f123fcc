"""Example workflows. durable_workflow imports every app's ``workflows`` module at startup.

This module holds the sequential, retry and timer examples; ``approvals.py`` (signal,
query, updates) and ``fulfilment.py`` (all(), a child workflow, a saga) are imported
below so that their classes register too.

Workflow bodies are replayed from history, so they only compute and call ``dw.*`` helpers;
anything with side effects (I/O, clocks, randomness, the database) lives in an Activity.
Type keys are explicit strings: they are stored in history and must survive refactors.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from orders import approvals, fulfilment  # noqa: F401  (registers their workflows)

logger = logging.getLogger("orders")


class ReserveStock(Activity):
    type_key = "orders.reserve-stock"

    def handle(self, sku: str, quantity: int) -> str:
        logger.info("reserving %s x %s", quantity, sku)
        # activity_id() is stable across retries: a natural idempotency key.
        return f"rsv-{self.activity_id()[-8:]}"


class ChargeCard(Activity):
    type_key = "orders.charge-card"

    def handle(self, order_id: str, amount_cents: int) -> dict[str, Any]:
        logger.info("charging %s cents for order %s", amount_cents, order_id)
        return {"charge_id": f"ch-{order_id[:8]}", "amount_cents": amount_cents}


class SendReceipt(Activity):
    type_key = "orders.send-receipt"

    def handle(self, email: str, charge_id: str) -> str:
        logger.info("mailing receipt for %s to %s", charge_id, email)
        return f"receipt sent to {email}"


class GatewayTimeoutError(Exception):
    """What a flaky third-party API raises now and then."""


class CapturePayment(Activity):
    """Fails its first two attempts, as a flaky payment gateway would."""

    type_key = "orders.capture-payment"
    tries = 5

    def backoff(self) -> list[int]:
        return [1]  # one second between attempts (the last entry repeats)

    def handle(self, charge_id: str) -> dict[str, Any]:
        attempt = self.attempt_count()
        if attempt <= 2:
            logger.info("capture %s: gateway timeout on attempt %s", charge_id, attempt)
            raise GatewayTimeoutError(f"gateway timed out (attempt {attempt})")
        logger.info("capture %s: captured on attempt %s", charge_id, attempt)
        return {"charge_id": charge_id, "captured_on_attempt": attempt}


class ShipParcel(Activity):
    type_key = "orders.ship-parcel"

    def handle(self, order_id: str) -> str:
        logger.info("handing order %s to the carrier", order_id)
        return f"TRK-{self.activity_id()[-6:].upper()}"


class AskForReview(Activity):
    type_key = "orders.ask-for-review"

    def handle(self, email: str, tracking: str, coupon: str) -> str:
        logger.info("asking %s to review %s (coupon %s)", email, tracking, coupon)
        return f"review request with coupon {coupon} sent to {email}"


class PlaceOrder(Workflow):
    """Sequential activities: each step runs once its predecessor has completed."""

    type_key = "orders.place-order"

    def handle(self, email: str, sku: str, quantity: int, amount_cents: int) -> dict[str, Any]:
        # A workflow may not call uuid.uuid4() itself (replay would see a new value);
        # dw.uuid4() records the value once and returns the same one on every replay.
        order_id = dw.uuid4()
        reservation = dw.activity(ReserveStock, sku, quantity)
        charge = dw.activity(ChargeCard, order_id, amount_cents)
        receipt = dw.activity(SendReceipt, email, charge["charge_id"])
        return {"order_id": order_id, "reservation": reservation, "receipt": receipt}


class CaptureWithRetries(Workflow):
    """A retrying activity: the engine schedules attempts 2 and 3 after its back-off."""

    type_key = "orders.capture-with-retries"

    def handle(self, charge_id: str) -> dict[str, Any]:
        return dw.activity(CapturePayment, charge_id)


class ShipThenFollowUp(Workflow):
    """A durable timer between two activities; no worker is busy while it waits."""

    type_key = "orders.ship-then-follow-up"

    def handle(self, order_id: str, email: str) -> dict[str, Any]:
        tracking = dw.activity(ShipParcel, order_id)
        shipped_at = dw.now()
        dw.seconds(2)  # in real life: dw.days(3)
        waited = (dw.now() - shipped_at).total_seconds()
        # Randomness in a body must be recorded: side_effect runs the function once and
        # returns the recorded value on every replay.
        coupon = dw.side_effect(lambda: secrets.token_hex(4).upper())
        review = dw.activity(AskForReview, email, tracking, coupon)
        return {"tracking": tracking, "waited_seconds": round(waited), "review": review}
