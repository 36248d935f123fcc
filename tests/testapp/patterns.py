"""Workflows for the everyday patterns of issue 21 (imported by workflows.py)."""

from __future__ import annotations

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
