"""Queues that limit their runs (``workflow_concurrency``): DBOS's workflow queues.

A run started on such a queue takes a slot in its start's transaction when one is
free and nobody waits before it (``held``); otherwise it waits (``waiting``, status
``pending``): its first workflow task is written with no message in flight, and a
claim of any task of a waiting run is refused (the task goes back to waiting, its
message dropped), so nothing polls.

A run holds its slot until it closes (continue-as-new hands it to the next run).
Once the closing commits, :func:`wake` lets the next waiting runs start, as many as
there are free slots, in line order (``workflow_queues.take_waiting``), and sends their
tasks; the repair pass calls :func:`wake_all` too, so a wake-up lost with its process
costs one pass. A run cancelled or terminated while it waits closes at once and never
held a slot. A worker killed mid-run does not leak the slot: the run is still open and
holds it, its task is handed out again by the repair pass, and its close frees it.

Lock order: the run (or the new run's instance) first, the queue's row last; :func:`wake`
takes the queue's row, then only rows nobody else holds (``skip_locked``).
"""

from __future__ import annotations

import datetime as dt

from durable_workflow import clock, queue_limits
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.logs import get_logger
from durable_workflow.store import database, runs, tasks, work_queues, workflow_queues
from durable_workflow.store.records import RunRecord, TaskRecord
from durable_workflow.store.workflow_queues import HELD, WAITING

logger = get_logger("durable_workflow")

#: Waiting runs let go at once, per call, when their queue's limit was removed.
_UNLIMITED_BATCH = 500

__all__ = ["HELD", "WAITING", "enter", "refuse", "release", "wake", "wake_all"]


def enter(run: RunRecord, *, now: dt.datetime) -> bool:
    """In a new run's start transaction: may it start now? Records its slot either way
    (``run.queue_slot``, saved with the run). ``True`` also when its queue has no limit."""
    limit = queue_limits.workflow_limit_of(run.queue)
    if limit is None or run.queue is None:
        return True
    work_queues.lock(run.queue, now=now)
    free = not workflow_queues.has_waiting(run.queue) and workflow_queues.held(run.queue) < limit
    run.set(queue_slot=HELD if free else WAITING)
    if not free:
        logger.debug("%s waits for a slot on workflow queue %r", run.label(), run.queue)
    return free


def refuse(run: RunRecord, task: TaskRecord, *, now: dt.datetime) -> bool:
    """In a workflow task's claim, under the run lock: ``True`` when the run still waits
    for a slot (the task waits again, with no message, until :func:`wake` sends it)."""
    if run.queue_slot != WAITING:
        return False
    workflow_queues.mark_task_waiting(task.id, now=now)
    return True


def release(run: RunRecord) -> None:
    """In a closing run's transaction: once it commits, the run's slot goes to the next
    waiting run (the run has its final status set)."""
    queue = run.queue
    if run.queue_slot == HELD and queue_limits.workflow_limit_of(queue) is not None:
        database.on_commit(lambda: wake(queue), robust=True)


@retry_transaction
def wake(queue: str | None) -> int:
    """Let as many waiting runs of ``queue`` start as it has free slots; how many. On a
    queue whose limit was taken out of the settings, every waiting run goes (in line
    order, a batch a call)."""
    if queue is None:
        return 0
    limit = queue_limits.workflow_limit_of(queue)
    now = clock.now()
    with database.atomic():
        work_queues.lock(queue, now=now)
        if not workflow_queues.has_waiting(queue):
            return 0
        if limit is None:
            taken = workflow_queues.take_waiting(queue, count=_UNLIMITED_BATCH, slot=None)
        else:
            free = limit - workflow_queues.held(queue)
            taken = workflow_queues.take_waiting(queue, count=free)
        sent = workflow_queues.waiting_tasks(taken, now=now)
        for row in sent:
            dispatch.enqueue(tasks.record_of(row))
        for run_id in set(taken) - {row.run_id for row in sent}:
            run = runs.get_run(run_id)  # its task was lost (or settled by a repair)
            if run is not None:
                wake_workflow(run, now=now, ready=False)
    if taken:
        logger.debug("%s runs let start on workflow queue %r", len(taken), queue)
    return len(taken)


def wake_all() -> int:
    """:func:`wake` every queue that limits its runs, and every queue that did and still
    has runs waiting (the repair pass)."""
    limited = queue_limits.workflow_limits()
    names = [*limited, *workflow_queues.stranded_queues(limited)]
    return sum(wake(name) for name in names)
