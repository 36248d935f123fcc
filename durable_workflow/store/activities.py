"""Activity executions and their attempts, and durable timers."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from django.db.models import F, QuerySet

from durable_workflow.ids import uuid7
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ActivityStatus,
    AttemptStatus,
    Timer,
    TimerStatus,
)
from durable_workflow.store import history, records, sql
from durable_workflow.store.records import ActivityRecord, AttemptRecord, TimerRecord

_FIELDS = records.columns(ActivityRecord)


_EXECUTIONS = sql.Table(ActivityExecution)
_ATTEMPTS = sql.Table(ActivityAttempt)


_record = records.reader(ActivityRecord)
_attempt_record = records.reader(AttemptRecord)


def build_execution(
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
    deadlines: dict[str, dt.datetime | None] | None = None,
    worker_session_id: str | None = None,
    id: uuid.UUID | None = None,
) -> sql.Built:
    """An unsaved execution row, for :func:`save_executions` (``id``: chosen by the
    caller, or a new one)."""
    return sql.Built(
        ActivityExecution,
        worker_session_id=worker_session_id,
        **(deadlines or {}),
        id=id or uuid7(),
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


def save_executions(rows: list[sql.Built]) -> list[ActivityRecord]:
    """Insert built executions in one statement."""
    _EXECUTIONS.insert((sql.values(row) for row in rows), defer=True)
    return [_record(row) for row in rows]


def get_execution(execution_id: uuid.UUID | str) -> ActivityRecord | None:
    rows = _EXECUTIONS.select(_FIELDS, [("id", "=", execution_id)])
    return _row_record(rows[0]) if rows else None


def executions_statement(
    ids: sql.Statement[Any],
) -> sql.Statement[dict[uuid.UUID, ActivityRecord]]:
    """The executions whose ids the subquery ``ids`` selects, for ``sql.together``
    (outcome: their records by id)."""
    read = _EXECUTIONS.select_statement(_FIELDS, [("id", "IN SELECT", ids)])
    return read.then(lambda rows: {r.id: r for r in map(_row_record, rows)})


def _row_record(row: list[Any]) -> ActivityRecord:
    return ActivityRecord(**dict(zip(_FIELDS, row, strict=True)))


def start_attempt(
    execution: ActivityRecord,
    *,
    task_id: uuid.UUID,
    owner: str,
    lease_expires_at: dt.datetime,
    now: dt.datetime,
    retry_reason: str | None = None,
    deadlines: dict[str, dt.datetime | None] | None = None,
    first: bool = False,
) -> tuple[uuid.UUID, int]:
    """A new attempt row; the execution points at it as the only one that may settle.

    ``first``: the execution was built by :func:`mark_started` and is inserted already
    pointing at this attempt, so only the attempt row is written.
    """
    number = 1 if first else execution.attempt_count + 1
    attempt_id = execution.current_attempt_id if first else uuid7()
    if attempt_id is None:
        raise ValueError("first=True takes an execution that mark_started() prepared")
    attempt = sql.Built(
        ActivityAttempt,
        **(deadlines or {}),
        id=attempt_id,
        execution_id=execution.id,
        attempt_number=number,
        task_id=task_id,
        lease_owner=owner,
        lease_expires_at=lease_expires_at,
        retry_reason=retry_reason,
        started_at=now,
    )
    _ATTEMPTS.insert([sql.values(attempt)], defer=True)
    if not first:
        _EXECUTIONS.update(
            _started_fields(attempt_id, number, now), [("id", "=", execution.id)], defer=True
        )
    return attempt_id, number


def get_attempt(attempt_id: uuid.UUID) -> AttemptRecord | None:
    row = ActivityAttempt.objects.filter(id=attempt_id).first()
    return None if row is None else _attempt_record(row)


def mark_started(row: sql.Built, *, now: dt.datetime) -> None:
    """Make a built, unsaved execution say that its first attempt is running, under an
    id chosen now (for an activity this process starts in the transaction that
    schedules it: see ``start_attempt(first=True)``)."""
    for name, value in _started_fields(uuid7(), 1, now).items():
        setattr(row, name, value)


def _started_fields(attempt_id: uuid.UUID, number: int, now: dt.datetime) -> dict[str, Any]:
    return {
        "status": ActivityStatus.RUNNING,
        "attempt_count": number,
        "current_attempt_id": attempt_id,
        "started_at": now,
        "schedule_to_start_deadline_at": None,
    }


def close_attempt(
    attempt_id: uuid.UUID, status: str, *, now: dt.datetime, only_running: bool = False
) -> None:
    where: list[sql.Condition] = [("id", "=", attempt_id)]
    if only_running:
        where.append(("status", "=", AttemptStatus.RUNNING))
    _ATTEMPTS.update(
        {"status": status, "closed_at": now, "lease_expires_at": None}, where, defer=True
    )


def close_execution(execution_id: uuid.UUID, status: str, *, now: dt.datetime) -> None:
    """Close the row. A result is not copied onto it: the ``ActivityCompleted`` event
    written with it holds the result, and a copy here would write it a second time
    (see :func:`durable_workflow.store.history.activity_results`)."""
    _EXECUTIONS.update(
        {"status": status, "closed_at": now}, [("id", "=", execution_id)], defer=True
    )


def execution_results(executions: Sequence[ActivityExecution]) -> dict[uuid.UUID, Any]:
    """The result of each completed execution: the row's own copy on rows closed before
    results stopped being copied there, else its ``ActivityCompleted`` event's (one
    statement per run whose rows need it)."""
    found = {e.id: e.result for e in executions if e.result is not None}
    missing: dict[uuid.UUID, list[uuid.UUID]] = {}
    for e in executions:
        if e.result is None and e.status == ActivityStatus.COMPLETED:
            missing.setdefault(e.run_id, []).append(e.id)
    for run_id, ids in missing.items():
        found.update(history.activity_results(run_id, ids))
    return found


def reopen_execution(execution_id: uuid.UUID) -> None:
    """Back to pending before a retry (or a redelivery after a lost lease)."""
    ActivityExecution.objects.filter(id=execution_id).update(status=ActivityStatus.PENDING)


def record_heartbeat(
    execution_id: uuid.UUID,
    attempt_id: uuid.UUID,
    *,
    now: dt.datetime,
    until: dt.datetime | None,
    progress: dict[str, Any] | None = None,
    heartbeat_timeout: int | None = None,
) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(
        last_heartbeat_at=now, last_heartbeat_progress=progress
    )
    changes: dict[str, Any] = {"last_heartbeat_at": now, "lease_expires_at": until}
    if heartbeat_timeout:
        changes["heartbeat_deadline_at"] = now + dt.timedelta(seconds=heartbeat_timeout)
    ActivityAttempt.objects.filter(id=attempt_id).update(**changes)


def set_deadlines(execution_id: uuid.UUID, **deadlines: dt.datetime | None) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(**deadlines)


_OPEN = (ActivityStatus.PENDING, ActivityStatus.RUNNING)


def _due(kind: str, now: dt.datetime) -> QuerySet[ActivityExecution]:
    """Executions whose ``kind`` timeout has expired."""
    rows = ActivityExecution.objects.all()
    if kind == "schedule_to_close":
        return rows.filter(status__in=_OPEN, schedule_to_close_deadline_at__lte=now)
    if kind == "schedule_to_start":
        return rows.filter(status=ActivityStatus.PENDING, schedule_to_start_deadline_at__lte=now)
    field = "start_to_close_deadline_at" if kind == "start_to_close" else "heartbeat_deadline_at"
    attempts = ActivityAttempt.objects.filter(
        status=AttemptStatus.RUNNING, **{f"{field}__lte": now}
    ).values("id")
    return rows.filter(status=ActivityStatus.RUNNING, current_attempt_id__in=attempts)


TIMEOUT_KINDS = ("schedule_to_close", "schedule_to_start", "start_to_close", "heartbeat")


def timeouts_due(*, now: dt.datetime, limit: int) -> list[tuple[uuid.UUID, str]]:
    """(execution id, timeout kind) for every expired activity timeout, most final first."""
    found: list[tuple[uuid.UUID, str]] = []
    seen: set[uuid.UUID] = set()
    for kind in TIMEOUT_KINDS:
        for execution_id in _due(kind, now).values_list("id", flat=True)[:limit]:
            if execution_id not in seen:
                seen.add(execution_id)
                found.append((execution_id, kind))
    return found[:limit]


def timeout_still_due(execution_id: uuid.UUID, kind: str, *, now: dt.datetime) -> bool:
    return bool(_due(kind, now).filter(id=execution_id).exists())


def expire_attempt(attempt_id: uuid.UUID | None, *, now: dt.datetime) -> None:
    if attempt_id is not None:
        ActivityAttempt.objects.filter(id=attempt_id, status=AttemptStatus.RUNNING).update(
            status=AttemptStatus.EXPIRED, closed_at=now
        )


def execution_at_step(run_id: uuid.UUID, step: int) -> ActivityRecord | None:
    rows = _EXECUTIONS.select(
        _FIELDS, [("run_id", "=", run_id), ("sequence", "=", step)], order_by="id", limit=1
    )
    return ActivityRecord(**dict(zip(_FIELDS, rows[0], strict=True))) if rows else None


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
_timer_record = records.reader(TimerRecord)
_TIMERS = sql.Table(Timer)
_TIMER_FIELDS = records.columns(TimerRecord)


def create_timer(
    *,
    run_id: uuid.UUID,
    sequence: int,
    delay_seconds: float,
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


def timer_statement(
    timer_id: uuid.UUID | str | sql.Statement[Any],
) -> sql.Statement[TimerRecord | None]:
    """A timer's record (``None``: no such timer), as a statement for ``sql.together``;
    ``timer_id`` may be a subquery selecting it (a task's timer)."""
    by_subquery = isinstance(timer_id, sql.Statement)
    where: sql.Condition = ("id", "IN SELECT" if by_subquery else "=", timer_id)
    read = _TIMERS.select_statement(_TIMER_FIELDS, [where], limit=1)
    return read.then(lambda rows: TimerRecord(*rows[0]) if rows else None)


def fire_timer_statement(timer_id: uuid.UUID, *, now: dt.datetime) -> sql.Statement[int]:
    """Mark a pending timer fired, as a statement (outcome: the row count, 1 when it
    fired)."""
    return _TIMERS.update_statement(
        {"status": TimerStatus.FIRED, "fired_at": now},
        [("id", "=", timer_id), ("status", "=", TimerStatus.PENDING)],
    )


def open_work_clauses(run_id: uuid.UUID) -> list[tuple[str, list[Any]]]:
    """Whether the run has pending timers, and open activities, as SQL truths."""
    return [
        pending_timers_clause(run_id),
        _EXECUTIONS.exists_clause([("run_id", "=", run_id), ("status", "IN", _OPEN)]),
    ]


def pending_timers_clause(run_id: uuid.UUID) -> tuple[str, list[Any]]:
    return sql.Table(Timer).exists_clause(
        [("run_id", "=", run_id), ("status", "=", TimerStatus.PENDING)]
    )


def pending_timers_of_run(run_id: uuid.UUID) -> list[TimerRecord]:
    rows = Timer.objects.filter(run_id=run_id, status=TimerStatus.PENDING)
    return [_timer_record(row) for row in rows]


def bump_attempt_count(execution_id: uuid.UUID) -> None:
    ActivityExecution.objects.filter(id=execution_id).update(attempt_count=F("attempt_count") + 1)


def other_open_clause(
    run_id: uuid.UUID, execution_ids: Sequence[uuid.UUID]
) -> tuple[str, list[Any]]:
    """Whether an activity of the run other than these is still open, as an SQL truth
    (``sql.truths``)."""
    return _EXECUTIONS.exists_clause(
        [("run_id", "=", run_id), ("status", "IN", _OPEN), ("id", "NOT IN", execution_ids)]
    )
