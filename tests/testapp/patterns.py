"""Workflows for the everyday patterns of issue 21 (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow


class CarryInputs(Workflow):
    """Continues as new as soon as it has seen an input; collects inputs across runs."""

    type_key = "tests.patterns.carry"
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

    def handle(self, seen: list[str], runs_left: int) -> list[str]:
        dw.wait(lambda: bool(self.items))
        seen = seen + self.items
        if runs_left > 1:
            dw.continue_as_new(seen, runs_left - 1)
        return seen


class WaitsForGo(Workflow):
    """A child that waits for the ``go`` signal (or is cancelled first)."""

    type_key = "tests.patterns.waits-for-go"
    signals = ["go"]

    def handle(self, value: Any) -> dict[str, Any]:
        return {"value": value, "go": dw.wait_signal("go")}


class StartsChildren(Workflow):
    """``dw.start_child``: the handle's result later, signalled, cancelled, in groups."""

    type_key = "tests.patterns.starts-children"

    def handle(self, mode: str) -> Any:
        from tests.testapp.composition import ChildEcho

        if mode == "result":
            handle = dw.start_child(ChildEcho, 41)
            known = [handle.id(), handle.run_id(), handle.done()]
            return {"known": known, "value": handle.result(), "done": handle.done()}
        if mode == "signal":
            handle = dw.start_child(WaitsForGo, "x")
            handle.signal("go", "now")
            return handle.result()
        if mode == "cancel":
            handle = dw.start_child(WaitsForGo, "x")
            handle.cancel("no longer needed")
            try:
                return handle.result()
            except dw.ChildWorkflowCancelled:
                return "child cancelled"
        if mode == "select":
            slow = dw.start_child(WaitsForGo, "slow")
            fast = dw.start_child(ChildEcho, 1)
            first = dw.select({"slow": slow, "fast": fast, "timer": lambda: dw.timer(3600)})
            slow.signal("go", "late")
            return [first.key, first.result(), slow.result()["go"]]
        if mode == "all":
            handles = [dw.start_child(ChildEcho, n) for n in range(3)]
            return dw.all([*handles, lambda: dw.timer(5)])
        return self.named(mode)

    def named(self, mode: str) -> Any:
        from tests.testapp.composition import ChildEcho

        options = dw.ChildWorkflowOptions(instance_id=f"{self.workflow_id()}-named")
        if mode == "named":
            handle = dw.start_child(ChildEcho, options, 5)
            return [handle.id(), handle.result()]
        if mode == "taken":
            dw.child(ChildEcho, options, 1)
            try:
                dw.start_child(ChildEcho, options, 2)
            except dw.WorkflowAlreadyStartedError as exc:
                return [exc.outcome, exc.reason]
        raise ValueError(mode)


class Messenger(Workflow):
    """Signals or cancels another workflow through ``dw.external_workflow``."""

    type_key = "tests.patterns.messenger"

    def handle(self, target: str, mode: str) -> Any:
        other = dw.external_workflow(target)
        if mode == "signal":
            other.signal("approved-by", "a workflow")
            return "sent"
        if mode == "attempt-signal":
            result = other.attempt_signal("approved-by", "a workflow")
            return [result.accepted, result.outcome, result.rejection_reason]
        if mode == "cancel":
            other.cancel("not needed")
            return "cancel requested"
        if mode == "attempt-cancel":
            result = other.attempt_cancel("not needed")
            return [result.accepted, result.outcome, result.rejection_reason]
        if mode == "raises":
            try:
                other.signal("approved-by", "too late")
            except dw.CommandRejected as exc:
                return [exc.outcome, exc.reason]
        raise ValueError(mode)
