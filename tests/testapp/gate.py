"""Workflows for the deploy gate: one order flow whose code a test changes in place."""

from __future__ import annotations

import dataclasses

import durable_workflow as dw
from durable_workflow import Activity, Workflow

#: Which version of the code is "deployed": the original, or one of three breaking changes.
GATE_CODE = {"variant": "original"}


@dataclasses.dataclass(frozen=True)
class Parcel:
    weight: int


class Reserve(Activity):
    type_key = "tests.gate-reserve"

    def handle(self, order: int) -> str:
        return f"reserved {order}"


class Bill(Activity):
    type_key = "tests.gate-bill"

    def handle(self, order: int) -> str:
        return f"billed {order}"


class Audit(Activity):
    type_key = "tests.gate-audit"

    def handle(self, order: int) -> str:
        return f"audited {order}"


class GateOrder(Workflow):
    type_key = "tests.gate-order"
    signals = ["ship"]

    def handle(self, order: int) -> list[str]:
        variant = GATE_CODE["variant"]
        steps = []
        if variant == "inserted":
            steps.append(dw.activity(Audit, order))
        if variant == "reordered":
            steps += [dw.activity(Bill, order), dw.activity(Reserve, order)]
        else:
            steps += [dw.activity(Reserve, order), dw.activity(Bill, order)]
        if order % 10 == 0:
            dw.wait_signal("ship", timeout=3600)  # every tenth run stays open
        return steps


class GateOrderByParcel(GateOrder):
    """The same type with a changed argument type (swapped into the registry by a test)."""

    abstract = True

    def handle(self, order: Parcel) -> list[str]:  # type: ignore[override]
        return super().handle(order.weight)


class GateOther(Workflow):
    type_key = "tests.gate-other"

    def handle(self) -> str:
        return str(dw.activity(Reserve, 1))
