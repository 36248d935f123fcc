"""What a type checker infers at the public API (checked by mypy in ``make typecheck``).

Never run: mypy reads it. Every ``assert_type`` states an inferred type; a line
ending in ``# type: ignore[<code>]`` must fail to type-check (mypy reports the
ignore as unused otherwise, since ``warn_unused_ignores`` is on under strict).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any, assert_type

import durable_workflow as dw
from durable_workflow import (
    Activity,
    ActivityOptions,
    ChildWorkflowOptions,
    CommandResult,
    LocalActivityOptions,
    StartOptions,
    StartResult,
    Workflow,
    WorkflowStub,
)


@dataclasses.dataclass(frozen=True)
class Order:
    id: str
    cents: int
    placed: dt.datetime


@dataclasses.dataclass(frozen=True)
class Receipt:
    order_id: str
    charged: Decimal


class ChargeCard(Activity):
    def handle(self, order_id: str, cents: int) -> str:
        return f"ch_{order_id}_{cents}"


class FetchPrice(Activity):
    async def handle(self, sku: str) -> int:
        return len(sku)


class Ship(Workflow):
    def handle(self, order: Order) -> Receipt:
        return Receipt(order.id, Decimal(order.cents) / 100)


class OrderWorkflow(Workflow):
    def __init__(self) -> None:
        self.stage = "new"

    @dw.query("stage")
    def current_stage(self) -> str:
        return self.stage

    @dw.update("retry")
    def retry(self, attempts: int) -> list[int]:
        return list(range(attempts))

    @dw.signal("cancel")
    def on_cancel(self, reason: str) -> None:
        self.stage = reason

    def handle(self, order: Order, express: bool = False) -> Receipt:
        charge = dw.activity(ChargeCard, order.id, order.cents)
        assert_type(charge, str)
        assert_type(dw.activity(ChargeCard, ActivityOptions(), order.id, 1), str)
        assert_type(dw.activity(ChargeCard, order_id="o", cents=1), str)
        assert_type(dw.activity(FetchPrice, "tea"), int)  # an async handle(): its awaited value
        assert_type(dw.activity(FetchPrice, ActivityOptions(), sku="tea"), int)
        dw.activity(FetchPrice, 1)  # type: ignore[call-overload]
        assert_type(dw.local_activity(FetchPrice, "tea"), int)
        assert_type(dw.activity(ChargeCard, "o", 1, options=ActivityOptions()), str)
        assert_type(dw.execute_activity(ChargeCard, "o", 1), str)
        assert_type(dw.activity("billing.charge", "o", result_type=Receipt), Receipt)
        assert_type(dw.activity("billing.charge", "o"), Any)
        assert_type(dw.local_activity(ChargeCard, "o", 1), str)
        assert_type(dw.local_activity(ChargeCard, LocalActivityOptions(), "o", 1), str)
        assert_type(dw.execute_local_activity(ChargeCard, "o", 1), str)
        receipt = dw.child(Ship, order)
        assert_type(receipt, Receipt)
        assert_type(dw.child(Ship, ChildWorkflowOptions(), order), Receipt)
        assert_type(dw.execute_child_workflow(Ship, order), Receipt)
        charges = dw.all([lambda: dw.activity(ChargeCard, "a", 1), lambda: charge])
        assert_type(charges, list[str])
        assert_type(dw.side_effect(lambda: dt.datetime.now(dt.UTC)), dt.datetime)
        assert_type(dw.side_effect(lambda: {"a": 1}, result_type=dict[str, int]), dict[str, int])
        assert_type(dw.now(), dt.datetime)
        dw.activity(ChargeCard, order.id, "not cents")  # type: ignore[call-overload]
        dw.child(Ship, "not an order")  # type: ignore[call-overload]
        return receipt


def client_side(order: Order) -> None:
    stub = WorkflowStub.make(OrderWorkflow, "order-1")
    assert_type(stub.start(order), StartResult)
    assert_type(stub.start(order, express=True), StartResult)
    assert_type(stub.start(StartOptions(), order), StartResult)
    assert_type(stub.start(order, options=StartOptions()), StartResult)
    assert_type(stub.result(), Receipt)
    assert_type(stub.result(timeout=5), Receipt)
    assert_type(stub.output(), Receipt | None)
    assert_type(stub.query(OrderWorkflow.current_stage), str)
    assert_type(stub.query("stage"), Any)
    assert_type(stub.update(OrderWorkflow.retry, 3), list[int])
    assert_type(stub.update(OrderWorkflow.retry, attempts=3), list[int])
    assert_type(stub.update("retry", 3), Any)
    assert_type(stub.signal(OrderWorkflow.on_cancel, "changed my mind"), CommandResult)
    assert_type(WorkflowStub.load("order-1").result(), Any)
    assert_type(WorkflowStub.make("order-processing").start(1, 2, 3), StartResult)
    stub.start("not an order")  # type: ignore[call-overload]
    stub.update(OrderWorkflow.retry, "three")  # type: ignore[call-overload]
    stub.signal(OrderWorkflow.on_cancel, 42)  # type: ignore[call-overload]


async def async_client_side(order: Order) -> None:
    stub = await WorkflowStub.amake(OrderWorkflow, "order-1")
    assert_type(await stub.astart(order), StartResult)
    assert_type(await stub.aresult(timeout=5), Receipt)
    assert_type(await stub.aquery(OrderWorkflow.current_stage), str)
    assert_type(await stub.aupdate(OrderWorkflow.retry, 3), list[int])
    assert_type(await stub.asignal(OrderWorkflow.on_cancel, "changed my mind"), CommandResult)
    assert_type(await stub.acancel("no longer needed"), CommandResult)
    assert_type(await (await WorkflowStub.aload("order-1")).aresult(), Any)
    await stub.astart("not an order")  # type: ignore[call-overload]

    from durable_workflow.schedules import ScheduleManager

    assert_type(await ScheduleManager.atrigger("nightly"), str | None)
    await ScheduleManager.apause(42)  # type: ignore[arg-type]
