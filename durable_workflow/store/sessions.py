"""Worker-session rows (activity affinity leases) and the counts admission needs."""

from __future__ import annotations

import datetime as dt
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
)
from durable_workflow.store import database

Row = dict[str, Any]


def lock(namespace: str, session_id: str) -> Row | None:
    """The session row under a row lock (``None``: no such session)."""
    return (
        WorkerSession.objects.select_for_update()
        .filter(namespace=namespace, session_id=session_id)
        .values()
        .first()
    )


def get(namespace: str, session_id: str) -> Row | None:
    return WorkerSession.objects.filter(namespace=namespace, session_id=session_id).values().first()


def insert(**fields: Any) -> Row | None:
    """Create a session; ``None`` when a concurrent admission created it first."""
    try:
        with database.atomic():
            row = WorkerSession.objects.create(**fields)
    except IntegrityError:
        return None
    return WorkerSession.objects.filter(pk=row.pk).values().first()


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
    session_id: str, *, now: dt.datetime, owner: str | None = None, exclude_task_id: Any = None
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
    return list(
        WorkerSession.objects.filter(namespace=namespace)
        .filter(Q(status="active") | (~Q(status="closed") & Q(ttl_expires_at__lte=now)))
        .exclude(failure_reason="ttl_expired")
        .values()
    )


def listing(namespace: str, *, status: str | None = None, limit: int = 100) -> list[Row]:
    rows = WorkerSession.objects.filter(namespace=namespace)
    if status:
        rows = rows.filter(status=status)
    return list(rows.order_by("-updated_at", "-id").values()[:limit])


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
    return {row["execution__worker_session_id"]: row["n"] for row in rows}


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


def close_released_by_instance(namespace: str, instance_id: str, *, now: dt.datetime) -> list[str]:
    """Close the open sessions the instance's runs used that no open run of another
    instance uses (the instance has closed); returns their ids.

    The rows are locked in id order first, so two closings never wait on each other
    in opposite orders; most instances used no session and this is one read.
    """
    used = ActivityExecution.objects.filter(
        run__instance_id=instance_id, worker_session_id__isnull=False
    ).values("worker_session_id")
    elsewhere = (
        ActivityExecution.objects.filter(worker_session_id=OuterRef("session_id"))
        .exclude(run__instance_id=instance_id)
        .exclude(run__status__in=TERMINAL_RUN_STATUSES)
    )
    rows = (
        WorkerSession.objects.select_for_update()
        .filter(namespace=namespace, session_id__in=used)
        .exclude(status="closed")
        .exclude(Exists(elsewhere))
        .order_by("id")
    )
    released = dict(rows.values_list("id", "session_id"))
    if released:
        WorkerSession.objects.filter(id__in=released).update(
            status="closed", closed_at=now, updated_at=now
        )
    return list(released.values())


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
