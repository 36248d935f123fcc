"""Workflows for reset and fork (imported by workflows.py).

Tests flip ``FIX`` to simulate deploying a fix between the failed run and its reset.
"""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from tests.testapp.models import Invocation

#: ``charge``: the activity works; ``body``: the body no longer crashes.
FIX = {"charge": True, "body": True}


class Charge(Activity):
    type_key = "tests.rewind-charge"
    tries = 1

    def handle(self, amount: int) -> int:
        Invocation.objects.create(name="charge", key=self.activity_id())
        if not FIX["charge"]:
            raise ValueError("card declined")
        return amount * 10


class Step(Activity):
    type_key = "tests.rewind-step"

    def handle(self, amount: int) -> int:
        Invocation.objects.create(name="step", key=self.activity_id())
        return amount + 1


class Rewind(Workflow):
    """``step`` then (``wait``: a ``note`` signal) then ``charge``."""

    type_key = "tests.rewind"

    def __init__(self) -> None:
        self.notes: list[str] = []

    @dw.signal("note")
    def on_note(self, text: str) -> None:
        self.notes.append(text)

    @dw.query
    def seen(self) -> list[str]:
        return self.notes

    def handle(self, amount: int, mode: str = "plain") -> dict[str, Any]:
        first = dw.activity(Step, amount)
        if mode == "wait":
            dw.wait(lambda: len(self.notes) >= 1)
        if not FIX["body"]:
            raise RuntimeError("a bug in the body")
        second = dw.activity(Charge, first)
        return {"first": first, "second": second, "notes": list(self.notes)}
