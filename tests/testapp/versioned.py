"""Workflows for versioning and visibility (imported by workflows.py).

``VERSIONED_CODE`` switches the body between "v1" and "v2" to simulate a deploy.
"""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow

VERSIONED_CODE = {"version": "v1"}


class Versioned(Workflow):
    type_key = "tests.versioned"
    signals = ["go"]

    def handle(self) -> Any:
        from tests.testapp.workflows import Add, Greet

        if VERSIONED_CODE["version"] == "v1":
            first = dw.activity(Greet, "old path")
        else:
            version = dw.get_version("greeting-change", dw.DEFAULT_VERSION, 1)
            if version == dw.DEFAULT_VERSION:
                first = dw.activity(Greet, "old path")
            else:
                first = dw.activity(Add, 40, 2)
        dw.wait_signal("go")
        return first


class Patched(Workflow):
    type_key = "tests.patched"

    def handle(self, mode: str) -> Any:
        if mode == "patched":
            return dw.patched("new-thing")
        if mode == "version-range":
            return dw.get_version("ranged", 2, 3)
        if mode == "deprecated":
            dw.deprecate_patch("new-thing")
            return "new path"
        raise ValueError(mode)


class Tagged(Workflow):
    type_key = "tests.tagged"

    def handle(self, customer: str, priority: int) -> Any:
        from tests.testapp.workflows import Add

        dw.upsert_memo({"customer_name": customer, "lines": [{"sku": "A", "qty": 2}]})
        dw.upsert_search_attributes({"customer": customer, "priority": priority, "vip": False})
        dw.activity(Add, 1, 1)
        dw.upsert_memo({"customer_name": None, "status": "done"})
        dw.upsert_search_attributes({"stage": "done", "vip": None})
        return "tagged"


class Inbox(Workflow):
    """Consumes messages from a stream; forwards a reply to another instance."""

    type_key = "tests.inbox"

    def handle(self, wanted: int, reply_to: str | None = None) -> Any:
        seen: list[str] = []
        while len(seen) < wanted:
            dw.wait(lambda: self.inbox("requests").has_pending())
            peeked = self.inbox("requests").peek()
            for message in self.inbox("requests").receive(limit=10):
                seen.append(message["payload_reference"])
            assert len(peeked) >= 1
            if self.should_continue_as_new() and len(seen) < wanted:
                dw.continue_as_new(wanted - len(seen), reply_to)
        if reply_to:
            self.outbox("replies").send_reference(reply_to, f"done:{len(seen)}")
        return {"seen": seen, "cursor": self.inbox("requests").cursor()}
