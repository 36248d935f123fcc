"""Child calls: the parent's record of each child workflow and its outcome."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.ids import uuid7
from durable_workflow.models import ChildCall, ChildCallStatus
from durable_workflow.store import records, sql

OPEN = (ChildCallStatus.SCHEDULED, ChildCallStatus.STARTED)


@dataclasses.dataclass(frozen=True)
class ChildCallRecord:
    id: uuid.UUID
    parent_run_id: uuid.UUID
    sequence: int
    child_instance_id: str
    child_workflow_type: str
    child_run_id: uuid.UUID | None
    status: str
    parent_close_policy: str
    outcome: dict[str, Any] | None
    reported_run_id: uuid.UUID | None
    outcome_recorded: bool


_record = records.reader(ChildCallRecord)


def create_call(
    *,
    parent_run_id: uuid.UUID,
    sequence: int,
    child_instance_id: str,
    child_workflow_type: str,
    child_run_id: uuid.UUID | None,
    parent_close_policy: str,
    now: dt.datetime,
) -> ChildCallRecord:
    row = ChildCall.objects.create(
        id=uuid7(),
        parent_run_id=parent_run_id,
        sequence=sequence,
        child_instance_id=child_instance_id,
        child_workflow_type=child_workflow_type,
        child_run_id=child_run_id,
        reported_run_id=child_run_id,
        status=ChildCallStatus.STARTED,
        parent_close_policy=parent_close_policy,
        created_at=now,
    )
    return _record(row)


def record_outcome(
    parent_run_id: uuid.UUID,
    sequence: int,
    *,
    status: str,
    outcome: dict[str, Any],
    now: dt.datetime,
) -> None:
    ChildCall.objects.filter(parent_run_id=parent_run_id, sequence=sequence).update(
        status=status, outcome=outcome, closed_at=now
    )


def follow_run(parent_run_id: uuid.UUID, sequence: int, child_run_id: uuid.UUID) -> None:
    """The child continued as new: the call now follows the newer run."""
    ChildCall.objects.filter(parent_run_id=parent_run_id, sequence=sequence).update(
        child_run_id=child_run_id
    )


def needing_report(parent_run_id: uuid.UUID) -> list[ChildCallRecord]:
    """Calls whose new child run or outcome the parent's history does not show yet."""
    rows = ChildCall.objects.filter(parent_run_id=parent_run_id, outcome_recorded=False)
    return [
        r for r in map(_record, rows) if r.child_run_id != r.reported_run_id or r.status not in OPEN
    ]


def mark_reported(call_id: uuid.UUID, *, run_id: uuid.UUID | None, outcome: bool) -> None:
    ChildCall.objects.filter(id=call_id).update(reported_run_id=run_id, outcome_recorded=outcome)


def open_calls_clause(parent_run_id: uuid.UUID) -> tuple[str, list[Any]]:
    """Whether the run has open child calls, as an SQL truth (``sql.truths``)."""
    return sql.Table(ChildCall).exists_clause(
        [("parent_run_id", "=", parent_run_id), ("status", "IN", tuple(OPEN))]
    )


def open_calls(parent_run_id: uuid.UUID) -> list[ChildCallRecord]:
    rows = ChildCall.objects.filter(parent_run_id=parent_run_id, status__in=OPEN)
    return [_record(r) for r in rows]


def set_status(call_id: uuid.UUID, status: str, *, now: dt.datetime) -> None:
    ChildCall.objects.filter(id=call_id).update(status=status, closed_at=now)
