"""Workflows for signals, queries, updates and condition waits (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow


class Approval(Workflow):
    type_key = "tests.approval"
    signals = [
        "approved-by",
        "ping",
        {
            "name": "typed",
            "params": [
                {"name": "who", "type": "string"},
                {"name": "count", "type": "int", "required": False, "allows_null": True},
            ],
        },
    ]

    def __init__(self) -> None:
        self.stage = "new"
        self.ready = False
        self.items: list[str] = []
        self.seen: list[Any] = []

    @dw.query("current-stage")
    def current_stage(self) -> str:
        return self.stage

    @dw.query
    def starts_with(self, prefix: str) -> bool:
        return self.stage.startswith(prefix)

    @dw.query("snapshot")
    def snapshot(self) -> dict[str, Any]:
        return {"stage": self.stage, "ready": self.ready, "items": self.items, "seen": self.seen}

    @dw.query("sneaky")
    def sneaky(self) -> Any:
        from tests.testapp.workflows import Add

        return dw.activity(Add, 1, 2)

    @dw.update("mark-ready")
    def mark_ready(self, ready: bool = True) -> dict[str, bool]:
        self.ready = ready
        return {"ready": self.ready}

    @mark_ready.validator
    def _check_ready(self, ready: bool = True) -> None:
        if not isinstance(ready, bool):
            raise ValueError("ready must be a boolean")
        if self.stage == "approved":
            raise ValueError("already approved")

    @dw.update("add-item")
    def add_item(self, item: str) -> int:
        if item == "boom":
            self.items.append("half-done")
            raise ValueError("no booms allowed")
        self.items.append(item)
        return len(self.items)

    def handle(self, mode: str, timeout: int = 60) -> Any:
        from tests.testapp.workflows import Add

        self.stage = "waiting"
        if mode == "signal":
            who = dw.wait_signal("approved-by")
            self.stage = "approved"
            return who
        if mode == "signal-timeout":
            result = dw.wait("approved-by", timeout=timeout)
            self.stage = "done"
            return result
        if mode == "condition":
            ok = dw.wait(lambda: self.ready, timeout=timeout, condition_key="approval.ready")
            self.stage = "done"
            return ok
        if mode == "condition-forever":
            ok = dw.wait(lambda: self.ready)
            return [ok, self.items]
        if mode == "with-timeout":
            return dw.wait_with_timeout(timeout, lambda: self.ready, "approval.ready")
        if mode == "many":
            for _ in range(5):
                self.seen.append(dw.wait_signal("ping"))
                dw.activity(Add, len(self.seen), 0)
            return self.seen
        if mode == "typed":
            return dw.wait_signal("typed")
        if mode == "updates":
            dw.wait(lambda: len(self.items) >= 3)
            return self.items
        raise ValueError(mode)


class Handlers(Workflow):
    """Signals handled by a method rather than waited for."""

    type_key = "tests.handlers"

    def __init__(self) -> None:
        self.reasons: list[str] = []

    @dw.signal("note")
    def on_note(self, reason: str) -> None:
        self.reasons.append(reason)

    @dw.query
    def notes(self) -> list[str]:
        return self.reasons

    def handle(self, count: int) -> list[str]:
        dw.wait(lambda: len(self.reasons) >= count)
        return self.reasons
