"""Every read and write of the queue limits: the queue's lock row, its leases, its
rate window and its waiters.

The claim of a task on a limited queue runs, in its transaction, :func:`lock` then its
counts; the lock is always the last one the transaction takes (after the run lock), so
it cannot close a lock cycle. Waiters are ordered by priority (0 first), then age.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from django.db.models import Count, Q, QuerySet

from durable_workflow.models import Task, TaskStatus, TaskType, WorkQueue, WorkQueueStart

#: Why a ready task waits (no message in flight): the fleet-wide concurrency limit, the
#: rate window, or the per-worker limit of the node that was offered it.
CAPACITY, RATE, WORKER = "capacity", "rate", "worker"
WAITING = (CAPACITY, RATE, WORKER)
#: Sent by the engine for a free slot (or the next rate window), and not claimed yet.
WOKEN = "woken"
#: Most urgent first, then oldest; a fan-out's tasks share their creation time, so
#: their order in the workflow body decides among them.
_ORDER = ("priority", "created_at", "activity_execution__sequence", "id")


@dataclasses.dataclass(frozen=True)
class ClaimFacts:
    """What the gate needs of the task being claimed, beyond its record."""

    queue_wait: str | None
    priority: int
    created_at: dt.datetime
    sequence: int


@dataclasses.dataclass(frozen=True)
class Usage:
    """One queue's state, for the doctor, the admin and the metrics."""

    leased: int = 0
    waiting: int = 0
    waiting_by_reason: dict[str, int] = dataclasses.field(default_factory=dict)
    woken: int = 0
    starts_in_window: int = 0


def lock(name: str, *, now: dt.datetime) -> None:
    """Take the queue's row lock (creating the row at first use) until the transaction ends.

    On SQLite the transaction already holds the database's only write lock.
    """
    WorkQueue.objects.get_or_create(name=name, defaults={"created_at": now})
    WorkQueue.objects.select_for_update().filter(name=name).get()


def claim_facts(task_id: uuid.UUID) -> ClaimFacts:
    row = (
        Task.objects.filter(id=task_id)
        .values("queue_wait", "priority", "created_at", "activity_execution__sequence")
        .get()
    )
    return ClaimFacts(
        row["queue_wait"],
        row["priority"],
        row["created_at"],
        row["activity_execution__sequence"] or 0,
    )


def leased(name: str, *, now: dt.datetime, node: str | None = None) -> int:
    """Activity attempts of the queue that hold a live lease now (an expired lease's
    holder is presumed gone: the repair pass hands its task out again); with ``node``,
    only those that worker node holds."""
    rows = _activity_tasks(name).filter(status=TaskStatus.LEASED, lease_expires_at__gt=now)
    return (rows if node is None else rows.filter(lease_node=node)).count()


def leasing_nodes(name: str, *, now: dt.datetime) -> int:
    """Worker nodes holding a live lease on the queue."""
    rows = _activity_tasks(name).filter(status=TaskStatus.LEASED, lease_expires_at__gt=now)
    return rows.values("lease_node").distinct().count()


def set_lease_node(task_id: uuid.UUID, node: str) -> None:
    Task.objects.filter(id=task_id).update(lease_node=node)


def woken(name: str, *, due_by: dt.datetime | None = None, exclude: uuid.UUID | None = None) -> int:
    """Tasks the engine sent and no worker has claimed yet (with ``due_by``: only those
    whose message is due by then; a rate window's next task is sent ahead of time)."""
    rows = _activity_tasks(name).filter(status=TaskStatus.READY, queue_wait=WOKEN)
    if due_by is not None:
        rows = rows.filter(available_at__lte=due_by)
    if exclude is not None:
        rows = rows.exclude(id=exclude)
    return rows.count()


def sent_ahead(name: str, *, now: dt.datetime) -> bool:
    """Is a task already sent for a rate window that has not opened yet?"""
    return (
        _activity_tasks(name)
        .filter(status=TaskStatus.READY, queue_wait=WOKEN, available_at__gt=now)
        .exists()
    )


def starts_since(name: str, since: dt.datetime) -> list[dt.datetime]:
    """Start times of the queue's attempts after ``since``, oldest first."""
    return list(
        WorkQueueStart.objects.filter(queue=name, started_at__gt=since)
        .order_by("started_at")
        .values_list("started_at", flat=True)
    )


def record_start(name: str, *, now: dt.datetime, forget_before: dt.datetime) -> None:
    """Count a start in the queue's rate window (and drop starts the window has left)."""
    WorkQueueStart.objects.filter(queue=name, started_at__lte=forget_before).delete()
    WorkQueueStart.objects.create(queue=name, started_at=now)


def mark_waiting(task_id: uuid.UUID, *, reason: str, now: dt.datetime) -> None:
    """The claim was refused: the task waits without a message in flight."""
    Task.objects.filter(id=task_id, status=TaskStatus.READY).update(
        queue_wait=reason, updated_at=now
    )


def waiting_count(name: str) -> int:
    return _waiting(name).count()


def waiting_ahead(name: str, facts: ClaimFacts) -> int:
    """Waiters that go before a task of ``facts`` (a more urgent priority, or older)."""
    return (
        _waiting(name)
        .filter(
            Q(priority__lt=facts.priority)
            | Q(priority=facts.priority, created_at__lt=facts.created_at)
            | Q(
                priority=facts.priority,
                created_at=facts.created_at,
                activity_execution__sequence__lt=facts.sequence,
            )
        )
        .count()
    )


def take_waiting(
    name: str, *, count: int, now: dt.datetime, due: dt.datetime | None = None
) -> list[Task]:
    """Up to ``count`` waiting tasks of the queue, most urgent then oldest first, marked
    woken (due at ``due`` when given; rows another transaction holds are skipped: that
    one is cancelling or claiming them)."""
    if count <= 0:
        return []
    ids = list(
        _waiting(name)
        .filter(available_at__lte=now)
        .order_by(*_ORDER)
        .select_for_update(skip_locked=True, of=("self",))
        .values_list("id", flat=True)[:count]
    )
    if not ids:
        return []
    fields: dict[str, Any] = {"queue_wait": WOKEN, "last_dispatched_at": now, "updated_at": now}
    if due is not None:
        fields["available_at"] = due
    Task.objects.filter(id__in=ids).update(**fields)
    return list(Task.objects.filter(id__in=ids).order_by(*_ORDER))


def release_undeclared(declared: list[str], *, now: dt.datetime, limit: int = 500) -> list[Task]:
    """Waiting tasks of queues that have no limit any more (the setting changed under
    them): no longer waiting, to be sent like any ready task."""
    rows = (
        Task.objects.filter(
            task_type=TaskType.ACTIVITY, status=TaskStatus.READY, queue_wait__in=WAITING
        )
        .exclude(queue__in=declared)
        .select_for_update(skip_locked=True)
    )
    ids = list(rows.values_list("id", flat=True)[:limit])
    if not ids:
        return []
    Task.objects.filter(id__in=ids).update(queue_wait=None, last_dispatched_at=now, updated_at=now)
    return list(Task.objects.filter(id__in=ids))


def has_waiting(name: str) -> bool:
    return _waiting(name).exists()


def usage(names: list[str], *, now: dt.datetime, windows: dict[str, float]) -> dict[str, Usage]:
    """Each queue's :class:`Usage`; ``windows``: the rate period of rate-limited queues."""
    rows = (
        Task.objects.filter(task_type=TaskType.ACTIVITY, queue__in=names)
        .values("queue")
        .annotate(
            leased=Count("id", filter=Q(status=TaskStatus.LEASED, lease_expires_at__gt=now)),
            woken=Count("id", filter=Q(status=TaskStatus.READY, queue_wait=WOKEN)),
            **{
                reason: Count("id", filter=Q(status=TaskStatus.READY, queue_wait=reason))
                for reason in WAITING
            },
        )
    )
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        counts: dict[str, Any] = dict(row)  # the queue's name, then the COUNT(…) integers
        found[counts.pop("queue")] = counts
    out = {}
    for name in names:
        row_counts = found.get(name, {})
        by_reason = {reason: row_counts.get(reason, 0) for reason in WAITING}
        period = windows.get(name)
        out[name] = Usage(
            leased=row_counts.get("leased", 0),
            waiting=sum(by_reason.values()),
            waiting_by_reason=by_reason,
            woken=row_counts.get("woken", 0),
            starts_in_window=0
            if period is None
            else WorkQueueStart.objects.filter(
                queue=name, started_at__gt=now - dt.timedelta(seconds=period)
            ).count(),
        )
    return out


def waits_of_run(run_id: uuid.UUID) -> dict[uuid.UUID, tuple[str, str]]:
    """Activity execution id: (queue name, reason), for the run's waiting tasks."""
    rows = Task.objects.filter(
        run_id=run_id, task_type=TaskType.ACTIVITY, status=TaskStatus.READY, queue_wait__in=WAITING
    ).values_list("activity_execution_id", "queue", "queue_wait")
    # A waiting task always has an execution and a (limited) queue; the guards say so to
    # the type checker and cost nothing.
    return {
        execution: (queue, why)
        for execution, queue, why in rows
        if execution is not None and queue is not None and why is not None
    }


def waits_of_runs(run_ids: list[uuid.UUID]) -> dict[tuple[uuid.UUID, uuid.UUID], tuple[str, str]]:
    """(run id, activity execution id): (queue name, reason), for waiting tasks."""
    rows = Task.objects.filter(
        run_id__in=run_ids,
        task_type=TaskType.ACTIVITY,
        status=TaskStatus.READY,
        queue_wait__in=WAITING,
    ).values_list("run_id", "activity_execution_id", "queue", "queue_wait")
    return {
        (run, execution): (queue, why)
        for run, execution, queue, why in rows
        if execution is not None and queue is not None and why is not None
    }


def _waiting(name: str) -> QuerySet[Task]:
    return _activity_tasks(name).filter(status=TaskStatus.READY, queue_wait__in=WAITING)


def _activity_tasks(name: str) -> QuerySet[Task]:
    return Task.objects.filter(task_type=TaskType.ACTIVITY, queue=name)
