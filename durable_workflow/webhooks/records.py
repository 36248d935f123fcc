"""What the webhook responses read back: sequences, update lifecycles, ingress context.

Reads only, apart from ``attach_ingress``, which adds the request's context to
command rows the executor has just written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from durable_workflow.codec import envelope
from durable_workflow.engine.events import EventType
from durable_workflow.models import (
    HistoryEvent,
    Task,
    TaskType,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowUpdate,
)
from durable_workflow.store import runs
from durable_workflow.store.records import InstanceRecord, RunRecord
from durable_workflow.webhooks.responses import micros_z


def parse_uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def run_of_instance(instance: InstanceRecord, run_id: str) -> RunRecord | None:
    """The run ``run_id`` if it belongs to ``instance``."""
    parsed = parse_uuid(run_id)
    run = runs.get_run(parsed) if parsed else None
    if run is None or (run.namespace, run.instance_id) != (
        instance.namespace,
        instance.instance_id,
    ):
        return None
    return run


def command_sequence(command_id: Any) -> int | None:
    """1-based position of the command among the commands of its run."""
    row = WorkflowCommand.objects.filter(id=command_id).values("run_id", "created_at").first()
    if row is None or row["run_id"] is None:
        return None
    earlier = Q(created_at__lt=row["created_at"]) | Q(
        created_at=row["created_at"], id__lte=command_id
    )
    return WorkflowCommand.objects.filter(earlier, run_id=row["run_id"]).count()


def intake_group_id(command_id: Any) -> str | None:
    payload = WorkflowCommand.objects.filter(id=command_id).values_list("payload", flat=True)
    first = payload.first() or {}
    return first.get("intake_group_id") if isinstance(first, dict) else None


def attach_ingress(command_ids: Iterable[Any], context: dict[str, Any]) -> None:
    """Store the request context on the command rows, apart from the business arguments."""
    for row in WorkflowCommand.objects.filter(id__in=[c for c in command_ids if c]):
        row.metadata = {**(row.metadata or {}), "ingress": context}
        row.save(update_fields=["metadata"])


def first_workflow_task_id(run_id: Any) -> str | None:
    task = (
        Task.objects.filter(run_id=run_id, task_type=TaskType.WORKFLOW)
        .order_by("created_at")
        .values_list("id", flat=True)
        .first()
    )
    return str(task) if task else None


def find_update(update_id: str, instance_id: str, run_id: uuid.UUID | None) -> Any:
    parsed = parse_uuid(update_id)
    if parsed is None:
        return None
    rows = WorkflowUpdate.objects.filter(id=parsed, instance_id=instance_id)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return rows.select_related("command").first()


def update_fields(row: WorkflowUpdate) -> dict[str, Any]:
    """The lifecycle part of an update response, read from the durable rows."""
    status = row.status
    result = None
    if status == "completed" and row.result is not None:
        result = envelope.decode(row.result)
    applied_at = None
    if row.applied_step is not None and row.run_id is not None:
        applied_at = (
            HistoryEvent.objects.filter(
                run_id=row.run_id,
                event_type=EventType.UPDATE_APPLIED,
                payload__update_id=str(row.id),
            )
            .values_list("recorded_at", flat=True)
            .first()
        )
    failure_id = None
    if status == "failed":
        failure_id = (
            WorkflowFailure.objects.filter(source_kind="workflow_update", source_id=str(row.id))
            .values_list("id", flat=True)
            .first()
        )
    outcome = {"completed": "update_completed", "failed": "update_failed"}.get(status)
    if status == "rejected":
        outcome = row.command.outcome
    return {
        "outcome": outcome,
        "update_id": str(row.id),
        "update_name": row.update_name,
        "update_status": status,
        "workflow_sequence": row.applied_step,
        "accepted_at": micros_z(row.accepted_at) if status != "rejected" else None,
        "applied_at": micros_z(applied_at),
        "rejected_at": micros_z(row.closed_at) if status == "rejected" else None,
        "closed_at": micros_z(row.closed_at),
        "result": result,
        "failure_id": str(failure_id) if failure_id else None,
        "failure_message": (row.failure_message or None) if status != "completed" else None,
        "rejection_reason": row.rejection_reason,
    }
