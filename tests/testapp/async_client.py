"""A workflow the async client drives from async views (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow


class Tally(Workflow):
    """Adds what updates bring until the ``close`` signal, then doubles it in an activity."""

    type_key = "tests.async-tally"

    def __init__(self) -> None:
        self.total = 0
        self.closed = False

    @dw.query("total")
    def current_total(self) -> int:
        return self.total

    @dw.update("add")
    def add(self, amount: int) -> int:
        self.total += amount
        return self.total

    @dw.signal("close")
    def close(self) -> None:
        self.closed = True

    def handle(self, start: int) -> dict[str, Any]:
        from tests.testapp.workflows import Add

        self.total = start
        dw.wait(lambda: self.closed)
        doubled = dw.activity(Add, self.total, self.total)
        return {"total": self.total, "doubled": doubled}
