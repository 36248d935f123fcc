"""Every read and write of the queue limits: the queue's lock row, its leases, its waiters.

The claim of a task on a limited queue runs, in its transaction, :func:`lock` then
:func:`leased`; the lock is always the last one the transaction takes (after the run
lock), so it cannot close a lock cycle.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import Count, Q

from durable_workflow.models import Task, TaskStatus, TaskType, WorkQueue

CAPACITY = "capacity"
#: Sent by the engine when a slot freed, and not claimed yet.
WOKEN = "woken"


def lock(name: str, *, now: dt.datetime) -> None:
    """Take the queue's row lock (creating the row at first use) until the transaction ends.

    On SQLite the transaction already holds the database's only write lock.
    """
    WorkQueue.objects.get_or_create(name=name, defaults={"created_at": now})
    WorkQueue.objects.select_for_update().filter(name=name).get()


def leased(name: str, *, now: dt.datetime) -> int:
    """Activity attempts of the queue that hold a live lease now (an expired lease's
    holder is presumed gone: the repair pass hands its task out again)."""
    return _activity_tasks(name).filter(status=TaskStatus.LEASED, lease_expires_at__gt=now).count()


def woken(name: str) -> int:
    """Tasks the engine sent for a free slot and that no worker has claimed yet."""
    return _activity_tasks(name).filter(status=TaskStatus.READY, queue_wait=WOKEN).count()


def mark_waiting(task_id: uuid.UUID, *, now: dt.datetime) -> None:
    """The claim was refused for capacity: the task waits without a message in flight."""
    Task.objects.filter(id=task_id, status=TaskStatus.READY).update(
        queue_wait=CAPACITY, updated_at=now
    )


def take_waiting(name: str, *, count: int, now: dt.datetime) -> list[Task]:
    """Up to ``count`` waiting tasks of the queue, oldest first, marked woken (rows another
    transaction holds are skipped: that one is cancelling or claiming them)."""
    if count <= 0:
        return []
    ids = list(
        _activity_tasks(name)
        .filter(status=TaskStatus.READY, queue_wait=CAPACITY, available_at__lte=now)
        .order_by("created_at", "id")
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)[:count]
    )
    if not ids:
        return []
    Task.objects.filter(id__in=ids).update(queue_wait=WOKEN, last_dispatched_at=now, updated_at=now)
    return list(Task.objects.filter(id__in=ids).order_by("created_at", "id"))


def has_waiting(name: str) -> bool:
    return _activity_tasks(name).filter(status=TaskStatus.READY, queue_wait=CAPACITY).exists()


def usage(names: list[str], *, now: dt.datetime) -> dict[str, tuple[int, int]]:
    """``(leased, waiting)`` of each queue, for the doctor, the admin and the metrics."""
    rows = (
        Task.objects.filter(task_type=TaskType.ACTIVITY, queue__in=names)
        .values("queue")
        .annotate(
            leased=Count("id", filter=Q(status=TaskStatus.LEASED, lease_expires_at__gt=now)),
            waiting=Count("id", filter=Q(status=TaskStatus.READY, queue_wait=CAPACITY)),
        )
    )
    found = {row["queue"]: (row["leased"], row["waiting"]) for row in rows}
    return {name: found.get(name, (0, 0)) for name in names}


def waits_of_run(run_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """Activity execution id: queue name, for the run's tasks waiting for capacity."""
    rows = Task.objects.filter(
        run_id=run_id, task_type=TaskType.ACTIVITY, status=TaskStatus.READY, queue_wait=CAPACITY
    ).values_list("activity_execution_id", "queue")
    return {execution_id: queue for execution_id, queue in rows if execution_id is not None}


def waits_of_runs(run_ids: list[uuid.UUID]) -> dict[tuple[uuid.UUID, uuid.UUID], str]:
    """(run id, activity execution id): queue name, for tasks waiting for capacity."""
    rows = Task.objects.filter(
        run_id__in=run_ids,
        task_type=TaskType.ACTIVITY,
        status=TaskStatus.READY,
        queue_wait=CAPACITY,
    ).values_list("run_id", "activity_execution_id", "queue")
    return {(run, execution): queue for run, execution, queue in rows if execution is not None}


def _activity_tasks(name: str):  # type: ignore[no-untyped-def]
    return Task.objects.filter(task_type=TaskType.ACTIVITY, queue=name)
