"""The limits of named work queues, enforced when an activity attempt is leased.

A claim of a task on a limited queue locks the queue's row (last, after the run lock)
and counts the queue's live leases; at the limit the task is marked waiting and its
message is dropped: nothing is re-sent until a slot frees. Slots free when an attempt
on the queue ends (the worker that ran it calls :func:`wake`), when a lease is
reclaimed or handed back, and the repair pass calls :func:`wake_all` in case a wake-up
was lost; each sends at most as many waiting tasks as there are free slots, oldest
first, so a full queue costs one broker delivery per waiting task, not a poll.

Eager starts and fan-out batches bypass the broker and the claim; a limited queue's
activities never take those paths (``eager``).
"""

from __future__ import annotations

import datetime as dt

from durable_workflow import clock, queue_limits
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_transaction
from durable_workflow.logs import get_logger
from durable_workflow.models import TaskType
from durable_workflow.store import database, tasks, work_queues
from durable_workflow.store.records import TaskRecord

logger = get_logger("durable_workflow")


def limited(queue: str | None) -> bool:
    return queue_limits.limit_of(queue) is not None


def admit(task: TaskRecord, *, now: dt.datetime) -> bool:
    """In the claim's transaction, after the run lock: may ``task`` be leased now?

    ``False``: the queue is full; the task is marked waiting for capacity.
    """
    limit = queue_limits.limit_of(task.queue)
    if limit is None or limit.concurrency is None or task.task_type != TaskType.ACTIVITY:
        return True
    work_queues.lock(limit.name, now=now)
    if work_queues.leased(limit.name, now=now) < limit.concurrency:
        return True
    work_queues.mark_waiting(task.id, now=now)
    logger.debug("task %s waits for capacity on queue %r", task.id, task.queue)
    return False


@retry_transaction
def wake(queue: str | None) -> int:
    """Send as many of the queue's waiting tasks as it has free slots; how many."""
    limit = queue_limits.limit_of(queue)
    if limit is None or limit.concurrency is None or queue is None:
        return 0
    now = clock.now()
    with database.atomic():
        # Lock, then look: a claim refused a moment ago has committed its wait by then.
        work_queues.lock(queue, now=now)
        if not work_queues.has_waiting(queue):
            return 0
        free = limit.concurrency - work_queues.leased(queue, now=now) - work_queues.woken(queue)
        woken = work_queues.take_waiting(queue, count=free, now=now)
        for row in woken:
            dispatch.enqueue(tasks.record_of(row))
    return len(woken)


def wake_all() -> int:
    """:func:`wake` every limited queue (the repair pass: a lost wake-up costs one pass)."""
    return sum(wake(name) for name in queue_limits.declared())


def waiting_words(queue: str) -> str:
    """How describe(), the admin and the doctor say it."""
    return f'waiting for capacity on queue "{queue}"'
