"""Workflows traced by the OpenTelemetry tests: activities, a retry, a timer and a child."""

from __future__ import annotations

import durable_workflow as dw
from durable_workflow import Activity, Workflow


class Step(Activity):
    """Upper-cases its label; with ``fail_first`` the first attempt fails (one retry)."""

    type_key = "tests.traced.step"
    tries = 2

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, label: str, fail_first: bool = False) -> str:
        if fail_first and dw.activity_info().attempt == 1:
            raise RuntimeError("first attempt fails")
        return label.upper()


class Child(Workflow):
    type_key = "tests.traced.child"

    def handle(self) -> str:
        return dw.activity(Step, "c")


class Order(Workflow):
    """An activity that is retried once, a timer, a child, another activity, a signal."""

    type_key = "tests.traced.order"

    def __init__(self) -> None:
        self.go = False

    def handle(self, timer_seconds: float = 1) -> list[str]:
        first = dw.activity(Step, "a", True)
        dw.timer(timer_seconds)
        child = dw.child(Child)
        dw.wait(lambda: self.go)
        return [first, child, dw.activity(Step, "b")]

    @dw.signal
    def proceed(self) -> None:
        self.go = True


class CurrentSpan(Activity):
    """An async activity that answers the id of the span current after an await."""

    type_key = "tests.traced.current-span"

    async def handle(self) -> str:
        import asyncio

        from opentelemetry import trace

        await asyncio.sleep(0)
        return format(trace.get_current_span().get_span_context().span_id, "016x")


class AsyncTraced(Workflow):
    type_key = "tests.traced.async"

    def handle(self) -> str:
        return dw.activity(CurrentSpan)


class Again(Workflow):
    """Continues as new ``times`` times."""

    type_key = "tests.traced.again"

    def handle(self, times: int) -> str:
        if times:
            dw.continue_as_new(times - 1)
        return "done"


class Local(Workflow):
    """A local activity whose first attempt fails."""

    type_key = "tests.traced.local"

    def handle(self) -> str:
        return dw.local_activity(Step, "l", True)
