"""The workflows whose real runs the seed copies (``benchmarks/seed.py``).

Shaped like an order pipeline: a handful of activities carrying dictionaries
of a few hundred bytes, search attributes set at the start, and an approval
that waits on a signal with a timeout of days (a timer and a signal wait).
"""

from __future__ import annotations

import durable_workflow as dw
from durable_workflow import Activity, Workflow


def _lines(order_id: str, count: int) -> list[dict[str, object]]:
    return [
        {
            "sku": f"SKU-{order_id[-4:]}-{i:03d}",
            "description": f"item {i} of order {order_id}, packed in a standard box",
            "quantity": 1 + i % 3,
            "unit_price": {"amount": f"{9.99 + i:.2f}", "currency": "EUR"},
        }
        for i in range(count)
    ]


class Validate(Activity):
    type_key = "seed.validate"

    def handle(self, order: dict[str, object]) -> dict[str, object]:
        return {"order_id": order["order_id"], "valid": True, "lines": order["lines"]}


class Reserve(Activity):
    type_key = "seed.reserve"

    def handle(self, order_id: str, lines: list[dict[str, object]]) -> dict[str, object]:
        return {
            "reservation": f"res-{order_id}",
            "warehouse": "ams-2",
            "held": [line["sku"] for line in lines],
        }


class Charge(Activity):
    type_key = "seed.charge"

    def handle(self, order_id: str, amount: str, decline: bool = False) -> dict[str, object]:
        if decline:
            raise dw.NonRetryableError(f"card declined for order {order_id}: insufficient funds")
        return {"payment_id": f"pay-{order_id}", "amount": amount, "captured": True}


class Ship(Activity):
    type_key = "seed.ship"

    def handle(self, order_id: str, address: dict[str, str]) -> dict[str, object]:
        return {"tracking": f"TRK{order_id[-8:].upper()}", "carrier": "postnl", "to": address}


class Notify(Activity):
    type_key = "seed.notify"

    def handle(self, email: str, subject: str) -> bool:
        return True


class Order(Workflow):
    """Validate, reserve, wait for approval (signal, timeout in days), charge, ship, notify."""

    type_key = "seed.order"
    signals = ["approve"]

    def handle(self, order: dict[str, object], approval_days: float = 0, decline: bool = False):  # type: ignore[no-untyped-def]
        order_id = str(order["order_id"])
        checked = dw.activity(Validate, order)
        reservation = dw.activity(Reserve, order_id, checked["lines"])
        if approval_days:  # negative: no timeout (a signal wait with no timer)
            timeout = approval_days * 86_400 if approval_days > 0 else None
            approved = dw.wait_signal("approve", timeout=timeout)
            if approved is None:
                return {"order_id": order_id, "status": "expired"}
        payment = dw.activity(Charge, order_id, "129.90", decline)
        shipment = dw.activity(Ship, order_id, order["address"])
        dw.activity(Notify, order["email"], f"Your order {order_id} has shipped")
        return {
            "order_id": order_id,
            "reservation": reservation["reservation"],
            "payment": payment,
            "shipment": shipment,
        }


def order_arguments(order_id: str, lines: int = 4) -> dict[str, object]:
    return {
        "order_id": order_id,
        "customer_id": f"cust-{order_id[-6:]}",
        "email": f"customer-{order_id[-6:]}@example.com",
        "address": {
            "street": "Keizersgracht 123",
            "city": "Amsterdam",
            "postcode": "1015 CJ",
            "country": "NL",
        },
        "lines": _lines(order_id, lines),
    }
