"""The claim fence: a worker claims only tasks whose compatibility marker it supports.

Every claim point (workflow, activity and timer tasks, and the eager and inline
paths that call them) asks ``refuse(task)`` before it locks or writes
anything. A task's marker never changes after the task is created, so checking
the record read just before the claim is race-free.

Celery hands a message to whichever worker consumes the queue, so a refusing
worker gives the message back: when some live registered worker supports the
marker (and consumes the task's queue, as far as its registration says), the
same task id is re-published with a short countdown, and the task's
``last_dispatched_at`` is moved so the repair pass does not add duplicates.
When no live worker supports it, nothing is sent: the repair pass keeps
re-sending the ready task with its doubling back-off until a compatible worker
appears, so no message bounces between incompatible workers for ever.
"""

from __future__ import annotations

from durable_workflow import clock
from durable_workflow.compatibility import local_markers, mismatch_reason, supports
from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch
from durable_workflow.logs import get_logger
from durable_workflow.store import compatibility as compat_store
from durable_workflow.store import database
from durable_workflow.store.records import TaskRecord, WorkerMarkers

logger = get_logger("durable_workflow")


def accepts(task: TaskRecord) -> bool:
    """Does this process support ``task``'s compatibility marker?"""
    return mismatch_reason(local_markers(), task.compatibility) is None


def refuse(task: TaskRecord) -> bool:
    """True when this process may not claim ``task`` (its message is then handed back)."""
    markers = local_markers()
    reason = mismatch_reason(markers, task.compatibility)
    if reason is None:
        return False
    settings = get_settings()
    now = clock.now()
    supporters = [
        worker.worker_id
        for worker in compat_store.live_workers(
            now=now, stale_after=settings.WORKER_STALE_AFTER_SECONDS
        )
        if supports(worker.markers, task.compatibility) and _consumes(worker, task.queue)
    ]
    if not supporters:
        logger.info(
            "not claiming %s task %s: %s; no live worker supports it, the repair pass re-sends it",
            task.task_type,
            task.id,
            reason,
        )
        return True
    logger.info(
        "not claiming %s task %s: %s; handed back for %s",
        task.task_type,
        task.id,
        reason,
        ", ".join(supporters[:5]),
    )
    compat_store.note_handed_back(task.id, now=now)
    countdown = settings.COMPATIBILITY_HANDBACK_SECONDS or None
    database.on_commit(lambda: dispatch.backend().send(task, countdown), robust=True)
    return True


def _consumes(worker: WorkerMarkers, queue: str | None) -> bool:
    # Prefork children register no queues, and ``None`` means Celery's default
    # queue: in both cases the registration cannot rule the worker out.
    return queue is None or not worker.queues or queue in worker.queues
