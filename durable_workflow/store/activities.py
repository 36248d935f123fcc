"""Activity executions and their attempts, and durable timers."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.db.models import F

from durable_workflow.ids import uuid7
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ActivityStatus,
    AttemptStatus,
    Timer,
    TimerStatus,
)
from durable_workflow.store.records import ActivityRecord, TimerRecord

_FIELDS = (
    "id",
    "run_id",
    "sequence",
    "activity_type",
    "activity_class",
    "status",
    "arguments",
    "options",
    "queue",
    "connection",
    "attempt_count",
    "current_attempt_id",
)


def _record(row: ActivityExecution) -> ActivityRecord:
    return ActivityRecord(**{name: getattr(row, name) for name in _FIELDS})


def create_execution(
    *,
    run_id: uuid.UUID,
    sequence: int,
    activity_type: str,
    activity_class: str,
    arguments: dict[str, Any],
    options: dict[str, Any],
    queue: str | None,
    connection: str | None,
    now: dt.datetime,
) -> ActivityRecord:
    row = ActivityExecution.objects.create(
        id=uuid7(),
        run_id=run_id,
        sequence=sequence,
        activity_type=activity_type,
        activity_class=activity_class,
        arguments=arguments,
        options=options,
        queue=queue,
        connection=connection,
        scheduled_at=now,
    )
    return _record(row)


def get_execution(execution_id: uuid.UUID | str) -> ActivityRecord | None:
    row = ActivityExecution.objects.filter(id=execution_id).first()
    return _record(row) if row else None


def start_attempt(
    execution: ActivityRecord,
    *,
    task_id: uuid.UUID,
    owner: str,
    lease_expires_at: dt.datetime,
    now: dt.datetime,
    retry_reason: str | None = None,
) -> tuple[uuid.UUID, int]:
    """A new attempt row; the execution points at it as the only one that may settle."""
    number = execution.attempt_count + 1
    attempt = ActivityAttempt.objects.create(
        id=uuid7(),
        execution_id=execution.id,
        attempt_number=number,
        task_id=task_id,
        lease_owner=owner,
        lease_expires_at=lease_expires_at,
        retry_reason=retry_reason,
        started_at=now,
    )
    ActivityExecution.objects.filter(id=execution.id).update(
        status=ActivityStatus.RUNNING,
        attempt_count=number,
        current_attempt_id=attempt.id,
        started_at=now,
    )
    return attempt.id, number


def close_attempt(
    attempt_id: uuid.UUID, status: str, *, now: dt.datetime, only_running: bool = False
) -> None:
    rows = ActivityAttempt.objects.filter(id=attempt_id)
    if only_running:
        rows = rows.filter(status=AttemptStatus.RUNNING)
    rows.update(status=status, closed_at=now, lease_expires_at=None)


def close_execution(
    execution_id: uuid.UUID, status: str, *, now: dt.datetime, result: Any = None
) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(
        status=status, result=result, closed_at=now
    )


def reopen_execution(execution_id: uuid.UUID) -> None:
    """Back to pending before a retry (or a redelivery after a lost lease)."""
    ActivityExecution.objects.filter(id=execution_id).update(status=ActivityStatus.PENDING)


def record_heartbeat(
    execution_id: uuid.UUID, attempt_id: uuid.UUID, *, now: dt.datetime, until: dt.datetime
) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(last_heartbeat_at=now)
    ActivityAttempt.objects.filter(id=attempt_id).update(
        last_heartbeat_at=now, lease_expires_at=until
    )


def expire_attempt(attempt_id: uuid.UUID | None, *, now: dt.datetime) -> None:
    if attempt_id is not None:
        ActivityAttempt.objects.filter(id=attempt_id, status=AttemptStatus.RUNNING).update(
            status=AttemptStatus.EXPIRED, closed_at=now
        )


def execution_at_step(run_id: uuid.UUID, step: int) -> ActivityRecord | None:
    row = ActivityExecution.objects.filter(run_id=run_id, sequence=step).first()
    return _record(row) if row else None


def expired_attempt_count(execution_id: uuid.UUID) -> int:
    return ActivityAttempt.objects.filter(
        execution_id=execution_id, status=AttemptStatus.EXPIRED
    ).count()


def open_executions_of_run(run_id: uuid.UUID) -> list[ActivityRecord]:
    rows = ActivityExecution.objects.filter(
        run_id=run_id, status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    )
    return [_record(row) for row in rows]


# ---------------------------------------------------------------- timers
def _timer_record(row: Timer) -> TimerRecord:
    return TimerRecord(
        id=row.id,
        run_id=row.run_id,
        sequence=row.sequence,
        status=row.status,
        delay_seconds=row.delay_seconds,
        fire_at=row.fire_at,
    )


def create_timer(
    *,
    run_id: uuid.UUID,
    sequence: int,
    delay_seconds: int,
    fire_at: dt.datetime,
    now: dt.datetime,
    fired: bool = False,
    kind: str | None = None,
) -> TimerRecord:
    row = Timer.objects.create(
        id=uuid7(),
        run_id=run_id,
        sequence=sequence,
        delay_seconds=delay_seconds,
        fire_at=fire_at,
        status=TimerStatus.FIRED if fired else TimerStatus.PENDING,
        fired_at=now if fired else None,
        timer_kind=kind,
        created_at=now,
    )
    return _timer_record(row)


def get_timer(timer_id: uuid.UUID | str) -> TimerRecord | None:
    row = Timer.objects.filter(id=timer_id).first()
    return _timer_record(row) if row else None


def fire_timer(timer_id: uuid.UUID, *, now: dt.datetime) -> bool:
    return bool(
        Timer.objects.filter(id=timer_id, status=TimerStatus.PENDING).update(
            status=TimerStatus.FIRED, fired_at=now
        )
    )


def pending_timers_of_run(run_id: uuid.UUID) -> list[TimerRecord]:
    rows = Timer.objects.filter(run_id=run_id, status=TimerStatus.PENDING)
    return [_timer_record(row) for row in rows]


def bump_attempt_count(execution_id: uuid.UUID) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(attempt_count=F("attempt_count") + 1)
