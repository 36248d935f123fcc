"""Which direct queue reaches a given worker, looked up sparingly.

Sticky routing and worker sessions send a task to one Celery node through the
queue only that node consumes (``WorkerRegistration.direct_queue``). The
lookups here read registrations at most every couple of seconds per process,
so routing adds no query to a step.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.store import workers
from durable_workflow.store.records import TaskRecord

#: Seconds a looked-up registration (direct queue, liveness) is reused in this process.
_LOOKUP_SECONDS = 2.0
_owners: dict[str, tuple[float, dict[str, Any] | None]] = {}


def owner_queue(worker: str, *, now: dt.datetime) -> str | None:
    """The direct queue of ``worker`` while it is routable (live, and its tasks are not
    failing on infrastructure errors), else ``None``: the shared queue then."""
    expires, row = _owners.get(worker, (0.0, None))
    if expires < time.monotonic():
        if len(_owners) > 10_000:
            _owners.clear()
        row = workers.get(worker)
        _owners[worker] = (time.monotonic() + _LOOKUP_SECONDS, row)
    stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
    routable = workers.is_routable(row, now=now, stale_after=stale_after)
    return row["direct_queue"] if routable and row else None


_consumer_counts: dict[tuple[str | None, str | None, str], tuple[float, int]] = {}


def consumers(task: TaskRecord, *, now: dt.datetime) -> int:
    """Live registered workers consuming the task's queue (looked up every few seconds)."""
    key = (task.connection, task.queue, task.task_type)
    cached = _consumer_counts.get(key)
    if cached is None or cached[0] < time.monotonic():
        from durable_workflow.transport.celery import effective_queue

        queue = effective_queue(task.queue, task.connection, task.task_type)
        stale = get_settings().WORKER_STALE_AFTER_SECONDS
        count = sum(
            1 for row in workers.live(now=now, stale_after=stale) if queue in (row["queues"] or [])
        )
        cached = (time.monotonic() + _LOOKUP_SECONDS, count)
        _consumer_counts[key] = cached
    return cached[1]


def forget() -> None:
    """Drop the looked-up registrations (tests that change the fleet)."""
    _owners.clear()
    _consumer_counts.clear()
