"""The row tables of a history export: commands, messages, activities, timers, tasks, failures."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

from durable_workflow.models import (
    ActivityExecution,
    Task,
    Timer,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)
from durable_workflow.operations.redaction import Redaction
from durable_workflow.store.activities import execution_results


def plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def fields_of(obj: Any, fields: Iterable[str]) -> dict[str, Any]:
    return {name: plain(getattr(obj, name)) for name in fields}


def commands(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = ("command_type", "status", "outcome", "rejection_reason", "source", "reason")
    out = []
    for index, command in enumerate(
        WorkflowCommand.objects.filter(run_id=run.id).order_by("created_at", "id")
    ):
        row = {
            "id": str(command.id),
            **fields_of(command, fields),
            "created_at": plain(command.created_at),
        }
        row["payload"] = redact(
            command.payload, path=f"commands[{index}].payload", category="command_payload"
        )
        row["metadata"] = redact(
            command.metadata, path=f"commands[{index}].metadata", category="command_context"
        )
        out.append(row)
    return out


def signals(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = (
        "id",
        "command_id",
        "signal_name",
        "status",
        "rejection_reason",
        "received_sequence",
        "applied_step",
        "received_at",
        "applied_at",
    )
    return [
        {
            **fields_of(signal, fields),
            "arguments": redact(
                signal.arguments, path=f"signals[{i}].arguments", category="signal_payload"
            ),
        }
        for i, signal in enumerate(WorkflowSignal.objects.filter(run_id=run.id))
    ]


def updates(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = (
        "id",
        "command_id",
        "update_name",
        "status",
        "rejection_reason",
        "applied_step",
        "accepted_at",
        "closed_at",
    )
    out = []
    for i, update in enumerate(WorkflowUpdate.objects.filter(run_id=run.id)):
        row = fields_of(update, fields)
        row["arguments"] = redact(
            update.arguments, path=f"updates[{i}].arguments", category="update_payload"
        )
        row["result"] = redact(
            update.result, path=f"updates[{i}].result", category="update_payload"
        )
        row["failure_message"] = redact(
            update.failure_message, path=f"updates[{i}].failure_message", category="update_payload"
        )
        out.append(row)
    return out


_ATTEMPT_FIELDS = (
    "id",
    "attempt_number",
    "task_id",
    "status",
    "lease_owner",
    "lease_expires_at",
    "retry_reason",
    "started_at",
    "last_heartbeat_at",
    "closed_at",
)


def activities(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = (
        "id",
        "sequence",
        "activity_type",
        "activity_class",
        "status",
        "options",
        "queue",
        "connection",
        "attempt_count",
        "current_attempt_id",
        "scheduled_at",
        "started_at",
        "closed_at",
        "last_heartbeat_at",
    )
    executions = list(
        ActivityExecution.objects.filter(run_id=run.id)
        .prefetch_related("attempts")
        .order_by("sequence")
    )
    results = execution_results(executions)
    out = []
    for i, execution in enumerate(executions):
        row = fields_of(execution, fields)
        row["arguments"] = redact(
            execution.arguments, path=f"activities[{i}].arguments", category="activity_payload"
        )
        row["result"] = redact(
            results.get(execution.id),
            path=f"activities[{i}].result",
            category="activity_payload",
        )
        row["attempts"] = [fields_of(a, _ATTEMPT_FIELDS) for a in execution.attempts.all()]
        out.append(row)
    return out


def timers(run: WorkflowRun) -> list[dict[str, Any]]:
    fields = (
        "id",
        "sequence",
        "status",
        "delay_seconds",
        "fire_at",
        "fired_at",
        "timer_kind",
        "created_at",
    )
    return [fields_of(t, fields) for t in Timer.objects.filter(run_id=run.id).order_by("sequence")]


def tasks(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = (
        "id",
        "task_type",
        "status",
        "available_at",
        "queue",
        "connection",
        "activity_execution_id",
        "timer_id",
        "attempt_count",
        "lease_owner",
        "lease_generation",
        "lease_expires_at",
        "dispatch_count",
        "last_dispatched_at",
        "last_error",
        "created_at",
        "updated_at",
    )
    out = []
    for i, task in enumerate(Task.objects.filter(run_id=run.id).order_by("created_at", "id")):
        row = fields_of(task, fields)
        row["payload"] = redact(task.payload, path=f"tasks[{i}].payload", category="task_payload")
        out.append(row)
    return out


def failures(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    fields = (
        "id",
        "source_kind",
        "source_id",
        "failure_category",
        "exception_type",
        "exception_class",
        "non_retryable",
        "details",
        "created_at",
    )
    out = []
    rows = WorkflowFailure.objects.filter(run_id=run.id).order_by("created_at", "id")
    for i, failure in enumerate(rows):
        row = fields_of(failure, fields)
        for name in ("message", "traceback"):
            row[name] = redact(
                getattr(failure, name),
                path=f"failures[{i}].{name}",
                category="failure_diagnostics",
            )
        out.append(row)
    return out
