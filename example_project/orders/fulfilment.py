"""Examples that compose work: a parallel fan-out with ``all()``, a child workflow,
and a saga that compensates when a late step fails.
"""

from __future__ import annotations

import logging
from typing import Any

import durable_workflow as dw
from durable_workflow import (
    Activity,
    ChildWorkflowOptions,
    NonRetryableError,
    ParentClosePolicy,
    Workflow,
)

logger = logging.getLogger("orders")


# ------------------------------------------------------------ parallel fan-out
class QuoteCarrier(Activity):
    type_key = "orders.quote-carrier"

    def handle(self, carrier: str, weight_grams: int) -> dict[str, Any]:
        price = {"dhl": 690, "ups": 720, "dpd": 540, "gls": 610}[carrier] + weight_grams // 100
        logger.info("%s quotes %s cents", carrier, price)
        return {"carrier": carrier, "price_cents": price}


class CheapestShipping(Workflow):
    """Asks four carriers at once (one nested group) and keeps the cheapest quote."""

    type_key = "orders.cheapest-shipping"

    def handle(self, weight_grams: int) -> dict[str, Any]:
        national, (regional_a, regional_b) = dw.all(
            [
                lambda: dw.all(
                    [lambda c=c: dw.activity(QuoteCarrier, c, weight_grams) for c in ("dhl", "ups")]
                ),
                lambda: dw.all(
                    [lambda c=c: dw.activity(QuoteCarrier, c, weight_grams) for c in ("dpd", "gls")]
                ),
            ]
        )
        quotes = [*national, regional_a, regional_b]
        return {"cheapest": min(quotes, key=lambda q: q["price_cents"]), "quotes": len(quotes)}


# --------------------------------------------------------------- child workflow
class PickItems(Activity):
    type_key = "orders.pick-items"

    def handle(self, order_id: str, skus: list[str]) -> list[str]:
        logger.info("picking %s for %s", ", ".join(skus), order_id)
        return sorted(skus)


class PrintLabel(Activity):
    type_key = "orders.print-label"

    def handle(self, order_id: str) -> str:
        return f"LBL-{order_id}"


class BookCourier(Activity):
    type_key = "orders.book-courier"

    def handle(self, label: str) -> str:
        logger.info("courier booked for %s", label)
        return f"TRK-{self.activity_id()[-6:].upper()}"


class PackParcel(Workflow):
    """The child: picks the items and prints a label, in parallel."""

    type_key = "orders.pack-parcel"

    def handle(self, order_id: str, skus: list[str]) -> dict[str, Any]:
        picked, label = dw.all(
            [
                lambda: dw.activity(PickItems, order_id, skus),
                lambda: dw.activity(PrintLabel, order_id),
            ]
        )
        return {"picked": picked, "label": label}


class FulfilOrder(Workflow):
    """The parent: packs through a child workflow, then books the courier."""

    type_key = "orders.fulfil-order"

    def handle(self, order_id: str, skus: list[str]) -> dict[str, Any]:
        parcel = dw.child(
            PackParcel,
            order_id,
            skus,
            # Should this parent be cancelled or terminated mid-way, cancel the packing too.
            options=ChildWorkflowOptions(parent_close_policy=ParentClosePolicy.REQUEST_CANCEL),
        )
        child = self.last_child()
        tracking = dw.activity(BookCourier, parcel["label"])
        return {"parcel": parcel, "tracking": tracking, "packed_by": child.id() if child else None}


# ------------------------------------------------------------------------ saga
class CourierUnavailableError(NonRetryableError):
    """A permanent refusal: retrying would not help, so compensate instead."""


class HoldStock(Activity):
    type_key = "orders.hold-stock"

    def handle(self, sku: str, quantity: int) -> str:
        logger.info("holding %s x %s", quantity, sku)
        return f"hold-{sku}"


class ReleaseStock(Activity):
    type_key = "orders.release-stock"

    def handle(self, hold: str) -> str:
        logger.info("releasing %s", hold)
        return f"released {hold}"


class TakePayment(Activity):
    type_key = "orders.take-payment"

    def handle(self, order_id: str, amount_cents: int) -> str:
        logger.info("taking %s cents for %s", amount_cents, order_id)
        return f"pay-{order_id}"


class RefundPayment(Activity):
    type_key = "orders.refund-payment"

    def handle(self, payment: str) -> str:
        logger.info("refunding %s", payment)
        return f"refunded {payment}"


class ReserveCourier(Activity):
    type_key = "orders.reserve-courier"

    def handle(self, order_id: str) -> str:
        raise CourierUnavailableError(f"no courier can collect {order_id} today")


class CheckoutSaga(Workflow):
    """Hold stock, take payment, reserve a courier; undo the first two if the last fails."""

    type_key = "orders.checkout-saga"

    def __init__(self) -> None:
        self.undone: list[str] = []

    def handle(self, order_id: str, sku: str, amount_cents: int) -> dict[str, Any]:
        try:
            hold = dw.activity(HoldStock, sku, 1)
            self.add_compensation(lambda: self.undone.append(dw.activity(ReleaseStock, hold)))
            payment = dw.activity(TakePayment, order_id, amount_cents)
            self.add_compensation(lambda: self.undone.append(dw.activity(RefundPayment, payment)))
            courier = dw.activity(ReserveCourier, order_id)
        except CourierUnavailableError as exc:
            self.compensate()  # newest first: refund the payment, then release the stock
            return {"status": "compensated", "reason": str(exc), "undone": self.undone}
        return {"status": "booked", "courier": courier}
