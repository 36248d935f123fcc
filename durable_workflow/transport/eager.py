"""Celery's ``task_always_eager`` (a common development setting): the engine's tasks run
in the process that commits them.

Celery's eager mode covers ``apply_async`` only; the engine publishes with
``send_task``, which would put the message on the broker (or nowhere) while the run
stayed ``pending``. So when the Celery app of a task's connection says
``task_always_eager``, the engine keeps eager mode's promise itself: a task that is
due runs here, once the transaction that made it commits, through the executor
functions a worker calls (the testing kit's in-process path). Tasks that the message
would deliver later (a timer, a retry's back-off, a delayed start) are not run early:
they stay ready until the repair pass sends them once due (its beat entry, or
``manage.py workflow_repair --loop``), and then run here in the same way.

Tasks that a task makes are run after it, in order, not inside it: however long a
workflow, the stack stays flat.
"""

from __future__ import annotations

import collections
import threading

from durable_workflow.logs import get_logger
from durable_workflow.store.records import TaskRecord

logger = get_logger("durable_workflow")

#: What ``task_always_eager`` makes the engine do, in the check's and the doctor's words.
EAGER_BEHAVIOUR = (
    "task_always_eager: no broker and no worker; each workflow, activity and timer task "
    "runs in the process that commits it, after the commit; delayed tasks (timers, retry "
    "back-offs, delayed starts) run only when the repair pass sends them once due (its "
    "beat entry, or `manage.py workflow_repair --loop`)"
)


class _Queue(threading.local):
    def __init__(self) -> None:
        self.pending: collections.deque[TaskRecord] = collections.deque()
        self.draining = False


_queue = _Queue()


def run(task: TaskRecord, countdown: float | None) -> None:
    """Run ``task`` (and what it leads to) in this process; a delayed one is left for the
    repair pass."""
    if countdown:
        logger.debug("eager mode: %s task %s waits for the repair pass", task.task_type, task.id)
        return
    _queue.pending.append(task)
    if _queue.draining:
        return  # the loop below, further up this thread's stack, runs it next
    _queue.draining = True
    try:
        while _queue.pending:
            _run_one(_queue.pending.popleft())
    finally:
        _queue.draining = False
        _queue.pending.clear()


def _run_one(task: TaskRecord) -> None:
    from durable_workflow.transport.in_process import run_task  # loads the executor

    try:
        run_task(task)
    except Exception:  # the task stays in the database: the repair pass hands it out again
        logger.exception("eager mode: %s task %s failed", task.task_type, task.id)
