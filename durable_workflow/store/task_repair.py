"""The repair pass's scans over tasks, and the leases put back to ready.

Ready tasks whose message is presumed lost (each re-send waits twice as long as the
last, capped), the note that a message was sent, expired leases reclaimed and a lease
its holder hands back early, and the ready, due tasks the testing kit's inline runner
takes. :mod:`durable_workflow.store.tasks` re-exports every name here, so callers keep
``tasks.<name>``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Any

from django.db import router, transaction
from django.db.models import F, Q

from durable_workflow.models import Task, TaskStatus
from durable_workflow.store import compatibility as compat
from durable_workflow.store import records, work_queues
from durable_workflow.store.records import TaskRecord

_record = records.reader(TaskRecord)


def due_for_redispatch(
    *, now: dt.datetime, after_seconds: int, max_backoff: int, limit: int
) -> list[tuple[TaskRecord, dt.datetime | None]]:
    """Ready, due tasks whose last message is old enough to be presumed lost, each with
    when that message was sent.

    Each re-send doubles the wait before the next one (capped), so a long
    backlog is not flooded with duplicates.
    """
    cutoff = now - dt.timedelta(seconds=after_seconds)
    rows = (
        Task.objects.filter(status=TaskStatus.READY, available_at__lte=cutoff)
        .filter(Q(last_dispatched_at__isnull=True) | Q(last_dispatched_at__lte=cutoff))
        # Waiting for capacity on a limited queue: the engine sends it when a slot frees.
        .exclude(queue_wait__in=work_queues.WAITING)
    )
    due = []
    for row in rows.order_by("available_at")[: limit * 4]:
        wait = min(after_seconds * 2 ** max(row.dispatch_count - 1, 0), max_backoff)
        if row.last_dispatched_at is None or row.last_dispatched_at <= now - dt.timedelta(
            seconds=wait
        ):
            due.append((_record(row), row.last_dispatched_at))
        if len(due) >= limit:
            break
    return due


def still_ready(task_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
    """Of ``task_ids``, those still ``ready``."""
    rows = Task.objects.filter(id__in=task_ids, status=TaskStatus.READY)
    return set(rows.values_list("id", flat=True))


def mark_dispatched(task_ids: list[uuid.UUID], *, now: dt.datetime) -> None:
    """Note a message sent for each task, skipping rows another transaction holds.

    The repair pass marks many tasks of many runs at once without their run locks,
    while workflow tasks lock their own rows (and a child's may update its parent's):
    taking the rows in whatever order the scan met them deadlocked once. A held row is
    being claimed or settled right now, so it needs no note; the others are taken in
    id order (``SKIP LOCKED``; one statement where the backend has no row locks).
    """
    with transaction.atomic(using=router.db_for_write(Task)):
        free = Task.objects.filter(id__in=task_ids).order_by("id")
        Task.objects.filter(id__in=free.select_for_update(skip_locked=True).values("id")).update(
            last_dispatched_at=now, dispatch_count=F("dispatch_count") + 1
        )


def expired_leases(*, now: dt.datetime, limit: int) -> list[TaskRecord]:
    rows = Task.objects.filter(status=TaskStatus.LEASED, lease_expires_at__lt=now).order_by(
        "lease_expires_at"
    )[:limit]
    return [_record(row) for row in rows]


def reclaim_expired(task_id: uuid.UUID, generation: int, *, now: dt.datetime) -> bool:
    """Put an expired lease back to ready; the generation guards against a race."""
    return bool(
        Task.objects.filter(
            id=task_id,
            status=TaskStatus.LEASED,
            lease_generation=generation,
            lease_expires_at__lt=now,
        ).update(**_reopened(now))
    )


def hand_back(
    task_id: uuid.UUID, lease_id: uuid.UUID, generation: int, *, now: dt.datetime
) -> bool:
    """Put a task this exact claim still holds back to ready, before its lease expires
    (its holder cannot finish it); ``False`` if the claim no longer holds it."""
    held = Task.objects.filter(
        id=task_id, status=TaskStatus.LEASED, lease_id=lease_id, lease_generation=generation
    )
    return bool(held.update(**_reopened(now)))


def _reopened(now: dt.datetime) -> dict[str, Any]:
    """A lease given up: ready at once, its message counted as sent now."""
    return {
        "status": TaskStatus.READY,
        "lease_owner": None,
        "lease_expires_at": None,
        "available_at": now,
        "last_dispatched_at": now,
        "dispatch_count": F("dispatch_count") + 1,
        "updated_at": now,
    }


def ready_and_due(
    *, now: dt.datetime, limit: int = 100, markers: Collection[str] | None = None
) -> list[TaskRecord]:
    """Ready, due tasks; with ``markers``, only those a worker supporting them may claim."""
    # A task waiting for capacity has no message: it is sent when a slot frees.
    rows = Task.objects.filter(status=TaskStatus.READY, available_at__lte=now).exclude(
        queue_wait__in=work_queues.WAITING
    )
    if markers is not None:
        rows = rows.filter(compat.claimable(markers))
    rows = rows.order_by("available_at", "id")[:limit]
    return [_record(row) for row in rows]
