"""Every read and write of the run slots of queues that limit their runs.

A run on such a queue is ``waiting`` (not let start: its first workflow task has no
message in flight) or ``held`` (let start; it holds the slot until it closes). The
count of held slots is taken under the queue's row lock (``work_queues.lock``), the
same row the activity limits lock, so two transactions cannot both take the last one.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection

from django.db.models import Count, Q, QuerySet

from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    Task,
    TaskStatus,
    TaskType,
    WorkflowRun,
)
from durable_workflow.store import work_queues

WAITING = "waiting"
HELD = "held"

_CLOSED = sorted(TERMINAL_RUN_STATUSES)


def _open_runs(queue: str) -> QuerySet[WorkflowRun]:
    return WorkflowRun.objects.filter(queue=queue).exclude(status__in=_CLOSED)


def held(queue: str) -> int:
    """Open runs of the queue holding a slot."""
    return _open_runs(queue).filter(queue_slot=HELD).count()


def has_waiting(queue: str) -> bool:
    return _open_runs(queue).filter(queue_slot=WAITING).exists()


def take_waiting(queue: str, *, count: int, slot: str | None = HELD) -> list[uuid.UUID]:
    """Up to ``count`` waiting runs of the queue, first in line first, now ``held`` (or
    ``slot``: ``None`` lets them go on a queue that no longer limits its runs).

    The line: priority 0 first, 9 last; within a priority, the order the runs were
    created. Runs another transaction holds are skipped (it is closing
    or signalling them); the next wake-up takes them.
    """
    if count <= 0:
        return []
    ids = list(
        _open_runs(queue)
        .filter(queue_slot=WAITING)
        .order_by("priority", "created_at", "id")
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)[:count]
    )
    if ids:
        WorkflowRun.objects.filter(id__in=ids).update(queue_slot=slot)
    return ids


def waiting_tasks(run_ids: list[uuid.UUID], *, now: dt.datetime) -> list[Task]:
    """The ready workflow tasks of these runs, marked sent (they had no message)."""
    rows = Task.objects.filter(
        run_id__in=run_ids, task_type=TaskType.WORKFLOW, status=TaskStatus.READY
    )
    ids = list(rows.values_list("id", flat=True))
    Task.objects.filter(id__in=ids).update(queue_wait=None, last_dispatched_at=now, updated_at=now)
    return list(Task.objects.filter(id__in=ids).order_by("created_at", "id"))


def stranded_queues(limited: Collection[str]) -> list[str]:
    """Queues besides ``limited`` whose runs still wait for a slot (their limit was taken
    out of the settings), read from the few ready tasks rather than from every run."""
    rows = (
        Task.objects.filter(
            status=TaskStatus.READY, task_type=TaskType.WORKFLOW, queue_wait=work_queues.CAPACITY
        )
        .exclude(queue__in=list(limited))
        .exclude(queue__isnull=True)
        .order_by()  # the default ordering would put created_at into the DISTINCT
        .values_list("queue", flat=True)
        .distinct()
    )
    return sorted(queue for queue in rows if queue is not None)  # NULLs excluded above


def mark_task_waiting(task_id: uuid.UUID, *, now: dt.datetime) -> None:
    """The run's workflow task waits with its run: no message, and repair leaves it be."""
    work_queues.mark_waiting(task_id, reason=work_queues.CAPACITY, now=now)


def usage(names: list[str]) -> dict[str, tuple[int, int]]:
    """``(held, waiting)`` of each queue, for the doctor, the admin and the metrics."""
    rows = (
        WorkflowRun.objects.filter(queue__in=names, queue_slot__isnull=False)
        .exclude(status__in=_CLOSED)
        .values("queue")
        .annotate(
            held=Count("id", filter=Q(queue_slot=HELD)),
            waiting=Count("id", filter=Q(queue_slot=WAITING)),
        )
        .order_by()
    )
    found = {row["queue"]: (row["held"], row["waiting"]) for row in rows}
    return {name: found.get(name, (0, 0)) for name in names}


def waiting_of_runs(run_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Run id: queue name, for those of ``run_ids`` waiting for a slot."""
    rows = (
        WorkflowRun.objects.filter(id__in=run_ids, queue_slot=WAITING)
        .exclude(status__in=_CLOSED)
        .values_list("id", "queue")
    )
    # A run waits for the slot of a named queue: its queue is never NULL here.
    return {run_id: queue for run_id, queue in rows if queue is not None}
