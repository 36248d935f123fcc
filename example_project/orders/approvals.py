"""Examples that talk to a running workflow: a signal-driven approval, and a cart
changed by updates and read by a query. ``run_example`` sends the signal and the
updates from the client side while the worker runs the workflows.
"""

from __future__ import annotations

import logging
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow

logger = logging.getLogger("orders")


class NotifyApprover(Activity):
    type_key = "orders.notify-approver"

    def handle(self, order_id: str, amount_cents: int) -> str:
        logger.info("asking a manager to approve %s cents for %s", amount_cents, order_id)
        return f"approval requested for {order_id}"


class IssueRefund(Activity):
    type_key = "orders.issue-refund"

    def handle(self, order_id: str, amount_cents: int, approver: str) -> str:
        logger.info("refunding %s cents for %s (approved by %s)", amount_cents, order_id, approver)
        return f"rf-{self.activity_id()[-8:]}"


class RefundApproval(Workflow):
    """Waits for a human: the ``approved-by`` signal, or a deadline."""

    type_key = "orders.refund-approval"
    signals = [{"name": "approved-by", "params": [{"name": "approver", "type": "string"}]}]

    def __init__(self) -> None:
        self.stage = "new"

    @dw.query("stage")
    def current_stage(self) -> str:
        return self.stage

    def handle(self, order_id: str, amount_cents: int) -> dict[str, Any]:
        self.stage = "notifying"
        dw.activity(NotifyApprover, order_id, amount_cents)
        self.stage = "waiting-for-approval"
        # Returns the signal's argument, or None if the deadline comes first.
        approver = dw.wait_signal("approved-by", timeout="10 minutes")
        if approver is None:
            self.stage = "expired"
            return {"order_id": order_id, "refunded": False}
        self.stage = "refunding"
        refund_id = dw.activity(IssueRefund, order_id, amount_cents, approver)
        self.stage = "refunded"
        return {"order_id": order_id, "refund_id": refund_id, "approved_by": approver}


class PriceCart(Activity):
    type_key = "orders.price-cart"

    def handle(self, items: dict[str, int]) -> int:
        return sum(quantity * 1250 for quantity in items.values())


class Cart(Workflow):
    """State changed by validated updates, read by a query, awaited by a condition."""

    type_key = "orders.cart"

    def __init__(self) -> None:
        self.items: dict[str, int] = {}
        self.checked_out = False

    @dw.update("add-item")
    def add_item(self, sku: str, quantity: int = 1) -> int:
        self.items[sku] = self.items.get(sku, 0) + quantity
        return sum(self.items.values())

    @add_item.validator
    def _check_item(self, sku: str, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        if self.checked_out:
            raise ValueError("the cart is already checked out")

    @dw.update
    def checkout(self) -> dict[str, int]:
        self.checked_out = True
        return dict(self.items)

    @dw.query
    def summary(self) -> dict[str, Any]:
        return {"items": self.items, "count": sum(self.items.values())}

    def handle(self, customer: str) -> dict[str, Any]:
        checked_out = dw.wait(
            lambda: self.checked_out, timeout="10 minutes", condition_key="cart.checked-out"
        )
        if not checked_out:
            return {"customer": customer, "status": "abandoned"}
        total = dw.activity(PriceCart, self.items)
        return {"customer": customer, "items": self.items, "total_cents": total}
