"""Once the body decides how the run ends, no later input is consumed by it (issue 21)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow
from durable_workflow.codec import envelope
from durable_workflow.engine import commands as c
from tests.unit.harness import Harness


class ContinuesOnFirst(Workflow):
    type_key = "unit.continues-on-first"
    signals = ["add"]

    def __init__(self) -> None:
        self.items: list[str] = []

    @dw.signal("add")
    def on_add(self, item: str) -> None:
        self.items.append(item)

    @dw.update("push")
    def push(self, item: str) -> str:
        self.items.append(item)
        return item

    def handle(self) -> Any:
        dw.wait(lambda: bool(self.items))
        dw.continue_as_new(self.items)


def _signal(h: Harness, signal_id: str) -> None:
    h.add(
        "SignalReceived",
        signal_id=signal_id,
        signal_name="add",
        arguments=envelope.encode([signal_id]),
    )


def _update(h: Harness, update_id: str) -> None:
    h.add(
        "UpdateAccepted",
        update_id=update_id,
        update_name="push",
        arguments=envelope.encode([update_id]),
    )


def _task(h: Harness) -> tuple[list[c.Command], Any]:
    runtime = h.runtime()
    runtime.feed(h.events)
    return runtime.take_commands(), runtime.closed


def test_a_signal_after_the_decision_is_left_for_the_next_run():
    h = Harness(ContinuesOnFirst)
    h.task()
    _signal(h, "s1")
    _signal(h, "s2")
    commands, closed = _task(h)
    applied = [cmd.signal_id for cmd in commands if isinstance(cmd, c.ApplySignal)]
    assert applied == ["s1"]
    assert isinstance(closed, c.ContinueAsNew)
    assert envelope.decode(closed.arguments) == [["s1"]]


def test_an_update_after_the_decision_is_neither_applied_nor_completed():
    h = Harness(ContinuesOnFirst)
    h.task()
    _update(h, "u1")
    _update(h, "u2")
    _signal(h, "s3")
    commands, closed = _task(h)
    touched = {getattr(cmd, "update_id", None) for cmd in commands} - {None}
    assert touched == {"u1"}
    assert not [cmd for cmd in commands if isinstance(cmd, c.ApplySignal)]
    assert envelope.decode(closed.arguments) == [["u1"]]
