"""Command records (accepted or rejected) and failure rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.ids import uuid7
from durable_workflow.models import WorkflowCommand, WorkflowFailure
from durable_workflow.store import records
from durable_workflow.store.records import CommandRecord

_command_record = records.reader(CommandRecord)


def record_command(
    *,
    namespace: str,
    instance_id: str,
    run_id: uuid.UUID | None,
    command_type: str,
    status: str,
    outcome: str,
    now: dt.datetime,
    rejection_reason: str | None = None,
    source: str = "client",
    reason: str = "",
    payload: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> CommandRecord:
    row = WorkflowCommand.objects.create(
        id=uuid7(),
        namespace=namespace,
        instance_id=instance_id,
        run_id=run_id,
        command_type=command_type,
        status=status,
        outcome=outcome,
        rejection_reason=rejection_reason,
        source=source,
        reason=reason,
        payload=payload or {},
        metadata=metadata or {},
        created_at=now,
    )
    return CommandRecord(
        id=row.id,
        instance_id=instance_id,
        run_id=run_id,
        command_type=command_type,
        status=status,
        outcome=outcome,
        rejection_reason=rejection_reason,
    )


@dataclasses.dataclass(frozen=True)
class PriorCommand:
    """A command recorded before under the same request id: what the caller got then."""

    command: CommandRecord
    reason: str
    metadata: dict[str, Any]
    signal_id: uuid.UUID | None
    #: The command's payload (``intake_group_id`` links a with-start pair).
    payload: dict[str, Any] = dataclasses.field(default_factory=dict)


def command_for_request(
    instance_id: str, command_type: str, request_id: str, *, namespace: str
) -> PriorCommand | None:
    """The command of this type the instance took first under ``request_id``, if any."""
    from durable_workflow.models import WorkflowSignal

    row = (
        WorkflowCommand.objects.filter(
            namespace=namespace,
            instance_id=instance_id,
            command_type=command_type,
            payload__request_id=request_id,
        )
        .order_by("created_at", "id")
        .first()
    )
    if row is None:
        return None
    signal_id = (
        WorkflowSignal.objects.filter(command_id=row.id).values_list("id", flat=True).first()
    )
    return PriorCommand(
        command=_command_record(row),
        reason=row.reason,
        metadata=dict(row.metadata or {}),
        signal_id=signal_id,
        payload=dict(row.payload or {}),
    )


def command_in_group(
    instance_id: str, command_type: str, intake_group_id: str
) -> CommandRecord | None:
    """The ``command_type`` command of one linked intake (signal- or update-with-start)."""
    row = (
        WorkflowCommand.objects.filter(
            instance_id=instance_id,
            command_type=command_type,
            payload__intake_group_id=intake_group_id,
        )
        .order_by("created_at", "id")
        .first()
    )
    if row is None:
        return None
    return _command_record(row)


def record_failure(
    *,
    run_id: uuid.UUID,
    source_kind: str,
    source_id: str,
    failure_category: str,
    exception_type: str,
    exception_class: str,
    message: str,
    traceback: str,
    non_retryable: bool,
    now: dt.datetime,
    details: dict[str, Any] | None = None,
) -> uuid.UUID:
    row = WorkflowFailure.objects.create(
        id=uuid7(),
        run_id=run_id,
        source_kind=source_kind,
        source_id=source_id,
        failure_category=failure_category,
        exception_type=exception_type[:255],
        exception_class=exception_class[:255],
        message=message,
        traceback=traceback,
        non_retryable=non_retryable,
        details=details or {},
        created_at=now,
    )
    return row.id


@dataclasses.dataclass(frozen=True)
class FailureRecord:
    """A stored failure, as ``result()`` and ``update()`` report it."""

    id: uuid.UUID
    exception_type: str
    exception_class: str
    message: str
    traceback: str
    category: str


def failure_of(*, run_id: uuid.UUID, source_kind: str, source_id: str) -> FailureRecord | None:
    """The newest failure recorded for one source (a run, an update...), if any."""
    row = (
        WorkflowFailure.objects.filter(run_id=run_id, source_kind=source_kind, source_id=source_id)
        .order_by("-created_at")
        .first()
    )
    if row is None:
        return None
    return FailureRecord(
        id=row.id,
        exception_type=row.exception_type,
        exception_class=row.exception_class,
        message=row.message,
        traceback=row.traceback,
        category=row.failure_category,
    )
