"""Workflows exposed over the webhooks (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow


class WebhookOrder(Workflow):
    """Exposed under its own alias; waits for approval, then for ``ready``."""

    type_key = "webhooks.order"
    webhook_alias = "order-workflow"
    signals = [
        "approved-by",
        {"name": "typed", "params": [{"name": "who", "type": "string"}]},
    ]

    def __init__(self) -> None:
        self.stage = "new"
        self.events: list[str] = []
        self.ready = False

    @dw.query("current-stage")
    def current_stage(self) -> str:
        return self.stage

    @dw.query("events-starting-with")
    def events_starting_with(self, prefix: str) -> int:
        return sum(1 for event in self.events if event.startswith(prefix))

    @dw.query("explode")
    def explode(self) -> None:
        raise RuntimeError("the query blew up")

    @dw.update("mark-ready")
    def mark_ready(self, approved: bool, source: str = "api") -> dict[str, Any]:
        self.ready = approved
        self.events.append(f"ready:{source}")
        return {"approved": approved}

    @mark_ready.validator
    def _check_ready(self, approved: bool, source: str = "api") -> None:
        if not isinstance(approved, bool):
            raise ValueError("approved must be a boolean")

    @dw.update("fail")
    def fail(self) -> None:
        raise ValueError("the update body failed")

    def handle(self, order_id: int, priority: str = "normal") -> dict[str, Any]:
        self.stage = "waiting"
        self.events.append("started")
        approver = dw.wait_signal("approved-by")
        self.events.append(f"approved:{approver}")
        self.stage = "approved"
        dw.wait(lambda: self.ready, condition_key="order.ready")
        self.stage = "done"
        return {"order_id": order_id, "priority": priority, "approver": approver}


class WebhookLooper(Workflow):
    """Exposed under its type key; continues as new once, then waits for a signal."""

    type_key = "webhooks.looper"
    webhook = True
    signals = ["go"]

    def handle(self, remaining: int = 1) -> int:
        if remaining > 0:
            dw.continue_as_new(remaining - 1)
        dw.wait_signal("go")
        return remaining


class WebhookNoHandle(Workflow):
    """Exposed, but declares no handle(): a start must be refused with 422."""

    type_key = "webhooks.no-handle"
    webhook = True


class WebhookHidden(Workflow):
    """Not exposed: every route must answer 404 for it."""

    type_key = "webhooks.hidden"
    signals = ["approved-by"]

    def handle(self) -> str:
        return str(dw.wait_signal("approved-by"))
