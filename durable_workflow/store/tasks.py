"""Tasks: creation, compare-and-set claims and settlement.

The repair pass's scans (and a lease handed back early) are in
:mod:`durable_workflow.store.task_repair`; their names are re-exported here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from django.db.models import F

from durable_workflow.ids import uuid7
from durable_workflow.models import Task, TaskStatus, TaskType
from durable_workflow.store import compatibility as compat
from durable_workflow.store import records, sql
from durable_workflow.store.records import TaskRecord
from durable_workflow.store.task_repair import due_for_redispatch as due_for_redispatch
from durable_workflow.store.task_repair import expired_leases as expired_leases
from durable_workflow.store.task_repair import hand_back as hand_back
from durable_workflow.store.task_repair import mark_dispatched as mark_dispatched
from durable_workflow.store.task_repair import ready_and_due as ready_and_due
from durable_workflow.store.task_repair import reclaim_expired as reclaim_expired
from durable_workflow.store.task_repair import still_ready as still_ready

_FIELDS = records.columns(TaskRecord)


_TASKS = sql.Table(Task)


#: The record of a task row (saved or only built).
record_of = records.reader(TaskRecord)


def _first(where: list[sql.Condition], **options: Any) -> TaskRecord | None:
    return _record_of_first(_TASKS.select(_FIELDS, where, limit=1, **options))


def _record_of_first(rows: list[list[Any]]) -> TaskRecord | None:
    return TaskRecord(**dict(zip(_FIELDS, rows[0], strict=True))) if rows else None


def create_task(**fields: Any) -> TaskRecord:
    """A ready task (see :func:`build_task` for the fields)."""
    return save_tasks([build_task(**fields)])[0]


def build_task(
    *,
    run_id: uuid.UUID,
    namespace: str,
    task_type: str,
    available_at: dt.datetime,
    queue: str | None,
    connection: str | None,
    now: dt.datetime,
    activity_execution_id: uuid.UUID | None = None,
    timer_id: uuid.UUID | None = None,
    payload: dict[str, Any] | None = None,
    compatibility: str | compat.FromRun | None = compat.FROM_RUN,
    sticky_worker_id: str | None = None,
    sticky_until: dt.datetime | None = None,
    priority: int | None = None,
    queue_wait: str | None = None,
    id: uuid.UUID | None = None,
) -> sql.Built:
    """An unsaved ready task carrying its run's compatibility marker (read here unless passed).

    ``priority`` (0 first, 9 last; ``None``: the default) orders waiters of a limited queue;
    ``queue_wait``: how it waits on one. ``id``: chosen by the caller, or a new one.
    """
    extra: dict[str, Any] = {} if priority is None else {"priority": priority}
    if queue_wait is not None:
        extra["queue_wait"] = queue_wait
    return sql.Built(
        Task,
        id=id or uuid7(),
        run_id=run_id,
        namespace=namespace,
        task_type=task_type,
        available_at=available_at,
        queue=queue,
        connection=connection,
        activity_execution_id=activity_execution_id,
        timer_id=timer_id,
        payload=payload or {},
        compatibility=compat.task_marker(run_id, compatibility),
        sticky_worker_id=sticky_worker_id,
        sticky_until=sticky_until,
        dispatch_count=1,
        last_dispatched_at=now,
        created_at=now,
        updated_at=now,
        **extra,
    )


def lease_new(
    row: sql.Built,
    *,
    owner: str,
    now: dt.datetime,
    lease_seconds: int,
    replay_mode: str | None = None,
) -> sql.Built:
    """A built task, leased at birth to ``owner`` (its first claim)."""
    leased: dict[str, Any] = {
        "status": TaskStatus.LEASED,
        "lease_owner": owner,
        "lease_id": uuid.uuid4(),
        "lease_generation": 1,
        "attempt_count": 1,
        "leased_at": now,
        "lease_expires_at": now + dt.timedelta(seconds=lease_seconds),
    }
    if replay_mode:
        leased.update(sticky_replay_mode=replay_mode, sticky_claimed_at=now)
    for name, value in leased.items():
        setattr(row, name, value)
    return row


def save_tasks(rows: list[sql.Built]) -> list[TaskRecord]:
    """Insert built tasks in one statement."""
    _TASKS.insert((sql.values(row) for row in rows), defer=True)
    return [record_of(row) for row in rows]


def ready_workflow_task(run_id: uuid.UUID) -> TaskRecord | None:
    return _first(_ready_workflow(run_id), order_by="created_at")


def ready_workflow_clause(run_id: uuid.UUID | sql.Statement[Any]) -> tuple[str, list[Any]]:
    """Whether the run has a ready workflow task, as an SQL truth (``sql.truths``);
    ``run_id`` may be a subquery selecting it."""
    return _TASKS.exists_clause(_ready_workflow(run_id))


def _ready_workflow(run_id: uuid.UUID | sql.Statement[Any]) -> list[sql.Condition]:
    by_run: sql.Condition = (
        ("run_id", "IN SELECT", run_id)
        if isinstance(run_id, sql.Statement)
        else ("run_id", "=", run_id)
    )
    return [
        by_run,
        ("task_type", "=", TaskType.WORKFLOW),
        ("status", "=", TaskStatus.READY),
    ]


def claim(
    task: TaskRecord,
    *,
    owner: str,
    now: dt.datetime,
    lease_seconds: int,
    replay_mode: str | None = None,
    count: bool = True,
) -> TaskRecord | None:
    """Lease a ready, due task by compare-and-set; ``None`` if someone else has it.

    The generation read with ``task`` is part of the condition, so the returned
    record (built without a second read) is exactly what the row now holds.
    """
    statement = claim_statement(
        task,
        owner=owner,
        now=now,
        lease_seconds=lease_seconds,
        replay_mode=replay_mode,
        count=count,
    )
    claimed: TaskRecord | None = sql.together(Task, [statement])[0]
    return claimed


def claim_statement(
    task: TaskRecord,
    *,
    owner: str,
    now: dt.datetime,
    lease_seconds: int,
    replay_mode: str | None = None,
    count: bool = True,
) -> sql.Statement[TaskRecord | None]:
    """:func:`claim` as a statement for ``sql.together`` (outcome: the leased record)."""
    update, leased = _claim(task, owner, now, lease_seconds, replay_mode, count)
    return update.then(lambda changed: leased if changed else None)


def claim_expected(
    task: TaskRecord,
    *,
    owner: str,
    now: dt.datetime,
    lease_seconds: int,
    replay_mode: str | None = None,
    count: bool = True,
) -> tuple[sql.Statement[None], TaskRecord]:
    """The claim as an expectation (``sql.expect_rows``: the transaction fails unless it
    takes the task), and the leased record it leaves."""
    update, leased = _claim(task, owner, now, lease_seconds, replay_mode, count)
    return sql.expect_rows(update, 1), leased


def _claim(
    task: TaskRecord,
    owner: str,
    now: dt.datetime,
    lease_seconds: int,
    replay_mode: str | None,
    count: bool = True,
) -> tuple[sql.Statement[int], TaskRecord]:
    """``count``: the claim counts an attempt (``False``: it was counted in advance)."""
    lease_id = uuid.uuid4()
    expires = now + dt.timedelta(seconds=lease_seconds)
    sticky = {"sticky_replay_mode": replay_mode, "sticky_claimed_at": now} if replay_mode else {}
    update = _TASKS.update_statement(
        {
            "status": TaskStatus.LEASED,
            "lease_owner": owner,
            "lease_id": lease_id,
            "lease_generation": sql.Add(1),
            "attempt_count": sql.Add(1 if count else 0),
            "leased_at": now,
            "lease_expires_at": expires,
            "updated_at": now,
            "queue_wait": None,
            **sticky,
        },
        _still_claimable(task, now),
    )
    leased = dataclasses.replace(
        task,
        status=TaskStatus.LEASED,
        lease_owner=owner,
        lease_id=lease_id,
        lease_generation=task.lease_generation + 1,
        attempt_count=task.attempt_count + (1 if count else 0),
        lease_expires_at=expires,
    )
    return update, leased


def _still_claimable(task: TaskRecord, now: dt.datetime) -> list[sql.Condition]:
    """The task is as it was read: ready, due, and not claimed since."""
    return [
        ("id", "=", task.id),
        ("status", "=", TaskStatus.READY),
        ("available_at", "<=", now),
        ("lease_generation", "=", task.lease_generation),
    ]


def take_statement(
    task: TaskRecord, status: str, *, owner: str, now: dt.datetime
) -> sql.Statement[int]:
    """Claim a ready, due task and settle it with ``status`` in one write (outcome: the
    row count, 1 when it was taken): for a task whose whole work is done in the
    transaction that takes it, a timer's. The row ends as a claim followed by
    :func:`settle` would leave it, attempt counted."""
    return _TASKS.update_statement(
        {
            "lease_owner": owner,
            "lease_id": uuid.uuid4(),
            "lease_generation": sql.Add(1),
            "attempt_count": sql.Add(1),
            "leased_at": now,
            "queue_wait": None,
            **_settled_fields(status, now, ""),
        },
        _still_claimable(task, now),
    )


def timer_of_statement(task_id: uuid.UUID | str) -> sql.Statement[list[list[Any]]]:
    """The timer id of a task, as a subquery (``IN SELECT``)."""
    return _TASKS.select_statement(["timer_id"], [("id", "=", task_id)])


def get_statement(task_id: uuid.UUID | str) -> sql.Statement[TaskRecord | None]:
    """:func:`get` as a statement for ``sql.together``."""
    read = _TASKS.select_statement(_FIELDS, [("id", "=", task_id)], limit=1)
    return read.then(_record_of_first)


def run_of_statement(task_id: uuid.UUID | str) -> sql.Statement[list[list[Any]]]:
    """The run id of a task, as a subquery (``IN SELECT``)."""
    return _TASKS.select_statement(["run_id"], [("id", "=", task_id)])


def get(task_id: uuid.UUID | str) -> TaskRecord | None:
    return _first([("id", "=", task_id)])


def next_ready_activities(
    run_id: uuid.UUID,
    *,
    queue: str | None,
    connection: str | None,
    now: dt.datetime,
    limit: int = 1,
) -> tuple[sql.Statement[list[TaskRecord]], sql.Statement[list[list[Any]]]]:
    """Up to ``limit`` ready, due activity tasks of the run on this queue and connection,
    as two statements for ``sql.together``: one reads the tasks (outcome: their
    records), the other selects their execution ids, as a subquery (``IN SELECT``).
    Same conditions, so the same first rows of the index while the run is locked (the
    caller still checks that they match)."""
    where = _next_ready(run_id, queue=queue, connection=connection, now=now)
    read = _TASKS.select_statement(_FIELDS, where, limit=limit)
    records = read.then(
        lambda rows: [TaskRecord(**dict(zip(_FIELDS, row, strict=True))) for row in rows]
    )
    return records, _TASKS.select_statement(["activity_execution_id"], where, limit=limit)


def _next_ready(
    run_id: uuid.UUID, *, queue: str | None, connection: str | None, now: dt.datetime
) -> list[sql.Condition]:
    return [
        ("run_id", "=", run_id),
        ("task_type", "=", TaskType.ACTIVITY),
        ("status", "=", TaskStatus.READY),
        ("available_at", "<=", now),
        ("queue", "IS NULL", None) if queue is None else ("queue", "=", queue),
        ("connection", "IS NULL", None) if connection is None else ("connection", "=", connection),
    ]


def settle_if_held_statement(
    task_id: uuid.UUID,
    lease_id: uuid.UUID,
    generation: int,
    status: str,
    *,
    now: dt.datetime,
    error: str = "",
) -> sql.Statement[bool]:
    """Settle the task only while this exact claim still owns it (the fencing check), as
    a statement for ``sql.together``.

    Its outcome ``False`` means the lease was lost (expired and handed out again, or
    the task was settled already): the caller must write nothing.
    """
    update = _TASKS.update_statement(
        {
            "status": status,
            "lease_expires_at": None,
            "last_error": error[:10000],
            "updated_at": now,
        },
        _held(task_id, lease_id, generation),
    )
    return update.then(bool)


def note_error(task_id: uuid.UUID, error: str, *, now: dt.datetime) -> None:
    """Say on the task why it was not taken (it stays as it is)."""
    Task.objects.filter(id=task_id).update(last_error=error[:10000], updated_at=now)


def renew_lease(
    task_id: uuid.UUID,
    lease_id: uuid.UUID,
    generation: int,
    *,
    until: dt.datetime,
    checked: bool = True,
) -> bool:
    """Extend a held lease; ``False`` if it is no longer held. ``checked=False``: the
    caller knows it holds the lease (its run lock and a check in this transaction), the
    answer is always ``True`` and the statement may be deferred."""
    changes, where = {"lease_expires_at": until}, _held(task_id, lease_id, generation)
    if not checked:
        _TASKS.update(changes, where, defer=True)
        return True
    return bool(_TASKS.update(changes, where))


def settle(task_id: uuid.UUID, status: str, *, now: dt.datetime, error: str = "") -> None:
    _TASKS.update(_settled_fields(status, now, error), [("id", "=", task_id)], defer=True)


def settled(row: sql.Built, status: str, *, now: dt.datetime) -> sql.Built:
    """A built task as :func:`settle` would leave it (to insert it settled)."""
    for name, value in _settled_fields(status, now, "").items():
        setattr(row, name, value)
    return row


def _settled_fields(status: str, now: dt.datetime, error: str) -> dict[str, Any]:
    return {
        "status": status,
        "lease_expires_at": None,
        "last_error": error[:10000],
        "updated_at": now,
    }


def settle_open_tasks_of_run(run_id: uuid.UUID, status: str, *, now: dt.datetime) -> None:
    _TASKS.update(
        {"status": status, "lease_expires_at": None, "updated_at": now},
        [("run_id", "=", run_id), ("status", "IN", (TaskStatus.READY, TaskStatus.LEASED))],
        defer=True,
    )


def release(task_id: uuid.UUID, *, available_at: dt.datetime, now: dt.datetime) -> None:
    """Hand a task back as ready (e.g. a timer woken early)."""
    Task.objects.filter(id=task_id).update(
        status=TaskStatus.READY,
        available_at=available_at,
        lease_owner=None,
        lease_expires_at=None,
        last_dispatched_at=now,
        updated_at=now,
    )


def defer(task_id: uuid.UUID, *, until: dt.datetime, now: dt.datetime) -> None:
    """A ready task that was offered and turned down: not due before ``until``, its
    message (sent now, due then) counted."""
    Task.objects.filter(id=task_id, status=TaskStatus.READY).update(
        available_at=until,
        last_dispatched_at=now,
        dispatch_count=F("dispatch_count") + 1,
        updated_at=now,
    )


def open_tasks_of_run(run_id: uuid.UUID) -> list[TaskRecord]:
    rows = Task.objects.filter(run_id=run_id, status__in=(TaskStatus.READY, TaskStatus.LEASED))
    return [record_of(row) for row in rows]


def cancel_tasks_of_execution(execution_id: uuid.UUID, *, now: dt.datetime) -> None:
    Task.objects.filter(
        activity_execution_id=execution_id, status__in=(TaskStatus.READY, TaskStatus.LEASED)
    ).update(status=TaskStatus.CANCELLED, lease_expires_at=None, updated_at=now)


def still_held(task_id: uuid.UUID, lease_id: uuid.UUID, generation: int) -> bool:
    """True while this exact claim still owns the task."""
    return _TASKS.exists(_held(task_id, lease_id, generation))


def _held(task_id: uuid.UUID, lease_id: uuid.UUID, generation: int) -> list[sql.Condition]:
    return [
        ("id", "=", task_id),
        ("status", "=", TaskStatus.LEASED),
        ("lease_id", "=", lease_id),
        ("lease_generation", "=", generation),
    ]


def workflow_task_in_progress(
    run_id: uuid.UUID, *, now: dt.datetime, besides: uuid.UUID | None = None
) -> bool:
    """A workflow task of the run (other than ``besides``) holds an unexpired lease (a
    local activity is running)."""
    where: list[sql.Condition] = [
        ("run_id", "=", run_id),
        ("task_type", "=", TaskType.WORKFLOW),
        ("status", "=", TaskStatus.LEASED),
        ("lease_expires_at", ">", now),
    ]
    if besides is not None:
        where.append(("id", "<>", besides))
    return _TASKS.exists(where)


def last_workflow_task_status(run_id: uuid.UUID) -> str | None:
    return (
        Task.objects.filter(run_id=run_id, task_type=TaskType.WORKFLOW)
        .order_by("-created_at", "-id")
        .values_list("status", flat=True)
        .first()
    )
