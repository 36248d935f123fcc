"""A tiny in-memory stand-in for the executor, to drive the pure runtime in unit tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.engine import commands as c
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.runtime import WorkflowRuntime

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Harness:
    """Keeps a history list and turns runtime commands into events, like the executor."""

    def __init__(self, cls: type, *args: Any) -> None:
        self.cls = cls
        self.events: list[HistoryEvent] = []
        self.clock = T0
        self.add("WorkflowStarted", arguments=envelope.encode(list(args)))
        self.warm: WorkflowRuntime | None = None

    def add(self, event_type: str, **payload: Any) -> HistoryEvent:
        self.clock += dt.timedelta(seconds=1)
        event = HistoryEvent(len(self.events) + 1, event_type, payload, self.clock)
        self.events.append(event)
        return event

    def runtime(self) -> WorkflowRuntime:
        runtime = WorkflowRuntime(
            factory=lambda: self.cls._dw_instantiate(runtime), workflow_id="wf-1", run_id="run-1"
        )
        return runtime

    def task(self, *, warm: bool = False) -> WorkflowRuntime:
        """One workflow task: replay (cold, or the warm runtime's tail) and record commands."""
        runtime = self.warm if warm and self.warm is not None else self.runtime()
        runtime.feed(self.events)
        for command in runtime.take_commands():
            self._record(command)
        if runtime.closed is not None:
            closed = runtime.closed
            if isinstance(closed, c.CompleteWorkflow):
                self.add("WorkflowCompleted", result=closed.result)
            else:
                self.add("WorkflowFailed", message=closed.failure.message)
        runtime.feed(self.events)  # the runtime now knows its own commands were recorded
        if warm:
            self.warm = runtime
        return runtime

    def _record(self, command: c.Command) -> None:
        if isinstance(command, c.ScheduleActivity):
            self.add(
                "ActivityScheduled", sequence=command.step, activity_type=command.activity_type
            )
        elif isinstance(command, c.StartTimer):
            self.add("TimerScheduled", sequence=command.step, delay_seconds=command.delay_seconds)
            if command.delay_seconds == 0:
                self.add("TimerFired", sequence=command.step)
        elif isinstance(command, c.RecordSideEffect):
            self.add("SideEffectRecorded", sequence=command.step, result=command.result)
        elif isinstance(command, c.RecordFailureHandled):
            self.add("FailureHandled", sequence=command.step)

    def complete(self, step: int, value: Any) -> None:
        self.add("ActivityStarted", sequence=step)
        self.add("ActivityCompleted", sequence=step, result=envelope.encode(value))

    def fail(self, step: int, exception_class: str, message: str) -> None:
        self.add(
            "ActivityFailed",
            sequence=step,
            exception_class=exception_class,
            exception_type=exception_class,
            message=message,
        )

    def fire(self, step: int) -> None:
        self.add("TimerFired", sequence=step)

    def types(self) -> list[str]:
        return [e.event_type for e in self.events]

    def result(self) -> Any:
        final = self.events[-1]
        assert final.event_type == "WorkflowCompleted", self.types()
        return envelope.decode(final.payload["result"])
