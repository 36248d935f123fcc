"""Worker-session rows (activity affinity leases) and the counts admission needs."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError
from django.db.models import Count, Exists, OuterRef, Q, Sum

from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityAttempt,
    ActivityExecution,
    AttemptStatus,
    Task,
    TaskStatus,
    TaskType,
    WorkerSession,
    WorkflowRun,
)
from durable_workflow.store import database, sql

#: A session row as ``.values()`` reads it (callers index it by column name).
Row = dict[str, Any]


def _row(values: Mapping[str, object] | None) -> Row | None:
    return None if values is None else dict(values)


def lock(namespace: str, session_id: str) -> Row | None:
    """The session row under a row lock (``None``: no such session)."""
    return _row(
        WorkerSession.objects.select_for_update()
        .filter(namespace=namespace, session_id=session_id)
        .values()
        .first()
    )


def get(namespace: str, session_id: str) -> Row | None:
    rows = WorkerSession.objects.filter(namespace=namespace, session_id=session_id)
    return _row(rows.values().first())


def insert(**fields: Any) -> Row | None:
    """Create a session; ``None`` when a concurrent admission created it first."""
    try:
        with database.atomic():
            row = WorkerSession.objects.create(**fields)
    except IntegrityError:
        return None
    return _row(WorkerSession.objects.filter(pk=row.pk).values().first())


def update(pk: int, **changes: Any) -> None:
    WorkerSession.objects.filter(pk=pk).update(**changes)


def held_active_count(
    owner: str, *, now: dt.datetime, namespace: str, exclude: str | None = None
) -> int:
    """Active, unexpired sessions ``owner`` holds (``exclude``: one session id not counted)."""
    rows = WorkerSession.objects.filter(
        namespace=namespace,
        lease_owner=owner,
        status="active",
        lease_expires_at__gt=now,
        ttl_expires_at__gt=now,
    )
    if exclude is not None:
        rows = rows.exclude(session_id=exclude)
    return rows.count()


def running_attempts(
    session_id: str,
    *,
    now: dt.datetime,
    owner: str | None = None,
    exclude_task_id: uuid.UUID | None = None,
) -> int:
    """Running in-session attempts whose lease has not lapsed."""
    rows = ActivityAttempt.objects.filter(
        execution__worker_session_id=session_id,
        status=AttemptStatus.RUNNING,
        lease_expires_at__gt=now,
    )
    if owner is not None:
        rows = rows.filter(lease_owner=owner)
    if exclude_task_id is not None:
        rows = rows.exclude(task_id=exclude_task_id)
    return rows.count()


def needing_refresh(namespace: str, *, now: dt.datetime) -> list[Row]:
    """Rows whose status may have moved on: active ones, and open ones past their TTL."""
    rows = (
        WorkerSession.objects.filter(namespace=namespace)
        .filter(Q(status="active") | (~Q(status="closed") & Q(ttl_expires_at__lte=now)))
        .exclude(failure_reason="ttl_expired")
    )
    return [dict(row) for row in rows.values()]


def listing(namespace: str, *, status: str | None = None, limit: int = 100) -> list[Row]:
    rows = WorkerSession.objects.filter(namespace=namespace)
    if status:
        rows = rows.filter(status=status)
    return [dict(row) for row in rows.order_by("-updated_at", "-id").values()[:limit]]


def counts(namespace: str) -> dict[str, int]:
    rows = (
        WorkerSession.objects.filter(namespace=namespace).values("status").annotate(n=Count("id"))
    )
    return {row["status"]: row["n"] for row in rows}


def active_activity_counts(session_ids: list[str], *, now: dt.datetime) -> dict[str, int]:
    rows = (
        ActivityAttempt.objects.filter(
            execution__worker_session_id__in=session_ids,
            status=AttemptStatus.RUNNING,
            lease_expires_at__gt=now,
        )
        .values("execution__worker_session_id")
        .annotate(n=Count("id"))
    )
    return {
        session: row["n"]
        for row in rows
        if (session := row["execution__worker_session_id"]) is not None  # matched by ``__in``
    }


def held_by(owner: str, *, namespace: str) -> list[str]:
    return list(
        WorkerSession.objects.filter(
            namespace=namespace, lease_owner=owner, status="active"
        ).values_list("session_id", flat=True)
    )


def used_by_open_run(session_id: str) -> bool:
    """Whether a run that has not closed has scheduled an activity in the session."""
    return (
        ActivityExecution.objects.filter(worker_session_id=session_id)
        .exclude(run__status__in=TERMINAL_RUN_STATUSES)
        .exists()
    )


def close_released_by_instance(namespace: str, instance_id: str, *, now: dt.datetime) -> int | None:
    """Close the open sessions the instance's runs used that no open run of another
    instance uses (the instance has closed).

    One write and no read, so a closing costs no extra round trip: inside a batched
    block (PostgreSQL's hot path) the statement waits for the transaction's last
    round trip and ``None`` comes back; elsewhere it runs at once and the number of
    sessions closed comes back. Most instances used no session and it changes nothing.
    """
    if sql.batching(WorkerSession):
        sql.defer_all(
            WorkerSession,
            [sql.Statement(_RELEASE, [now, now, namespace, instance_id, instance_id], _ignored)],
        )
        return None
    used = ActivityExecution.objects.filter(
        run__instance_id=instance_id, worker_session_id__isnull=False
    ).values("worker_session_id")
    elsewhere = (
        ActivityExecution.objects.filter(worker_session_id=OuterRef("session_id"))
        .exclude(run__instance_id=instance_id)
        .exclude(run__status__in=TERMINAL_RUN_STATUSES)
    )
    return (
        WorkerSession.objects.filter(namespace=namespace, session_id__in=used)
        .exclude(status="closed")
        .exclude(Exists(elsewhere))
        .update(status="closed", closed_at=now, updated_at=now)
    )


def _ignored(cursor: Any) -> None:
    return None


_TERMINAL = ", ".join(f"'{status}'" for status in sorted(TERMINAL_RUN_STATUSES))
#: The ORM update above as one statement of the engine's own (for deferral).
_RELEASE = (
    f"UPDATE {WorkerSession._meta.db_table} SET status = 'closed', closed_at = %s, updated_at = %s"
    f" WHERE namespace = %s AND status <> 'closed' AND session_id IN ("
    f"SELECT e.worker_session_id FROM {ActivityExecution._meta.db_table} e"
    f" JOIN {WorkflowRun._meta.db_table} r ON r.id = e.run_id"
    f" WHERE r.instance_id = %s AND e.worker_session_id IS NOT NULL)"
    f" AND NOT EXISTS (SELECT 1 FROM {ActivityExecution._meta.db_table} o"
    f" JOIN {WorkflowRun._meta.db_table} q ON q.id = o.run_id"
    f" WHERE o.worker_session_id = {WorkerSession._meta.db_table}.session_id"
    f" AND q.instance_id <> %s AND q.status NOT IN ({_TERMINAL}))"
)


#: How a worker's refusal of an in-session task starts the task's ``last_error``.
REFUSAL_PREFIX = "worker_session "


def refused_and_waiting() -> dict[str, int]:
    """In-session activity tasks still ready after a worker turned them down, and the
    messages they have had so far (the first ones included)."""
    totals = Task.objects.filter(
        status=TaskStatus.READY,
        task_type=TaskType.ACTIVITY,
        last_error__startswith=REFUSAL_PREFIX,
    ).aggregate(tasks=Count("id"), messages=Sum("dispatch_count"))
    return {"tasks": totals["tasks"] or 0, "messages": totals["messages"] or 0}
