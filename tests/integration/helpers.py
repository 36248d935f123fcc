"""Small helpers shared by integration tests."""

from __future__ import annotations

from typing import Any

from durable_workflow import WorkflowStub
from durable_workflow.models import Task, WorkflowFailure


def event_types(stub: WorkflowStub) -> list[str]:
    return [event.event_type for event in stub.history()]


def events_of(stub: WorkflowStub, event_type: str) -> list[dict[str, Any]]:
    return [event.payload for event in stub.history() if event.event_type == event_type]


def failures(stub: WorkflowStub) -> list[WorkflowFailure]:
    return list(WorkflowFailure.objects.filter(run_id=stub.run_id()).order_by("created_at"))


def tasks_of(stub: WorkflowStub, task_type: str | None = None) -> list[Task]:
    rows = Task.objects.filter(run_id=stub.run_id()).order_by("created_at")
    if task_type:
        rows = rows.filter(task_type=task_type)
    return list(rows)


def start(workflow: str, instance_id: str, *args: Any) -> WorkflowStub:
    stub = WorkflowStub.make(workflow, instance_id)
    stub.start(*args)
    return stub
