"""Running tasks in the calling process: the engine of the testing kit's fake mode.

No broker, no worker: the database says what is ready and due, and this
module runs it through the very same executor functions a Celery worker calls
(``transport/in_process.py``).
"""

from __future__ import annotations

import collections

from durable_workflow import clock, compatibility
from durable_workflow.store import tasks
from durable_workflow.store.records import TaskRecord
from durable_workflow.transport.in_process import run_task


class InlineBackend:
    """A dispatch backend that records what would have been sent, and sends nothing."""

    #: Tasks run in this very process (worker sessions treat it as a capable worker).
    in_process = True

    def __init__(self) -> None:
        self.sent: collections.Counter[str] = collections.Counter()

    def send(self, task: TaskRecord, countdown: float | None) -> None:
        self.sent[task.task_type] += 1


def run_ready_tasks(*, max_tasks: int = 100_000) -> int:
    """Run every ready task that is due now, until none is left; returns how many ran.

    The clock never moves here: a timer due in an hour stays pending until a
    test travels in time. Tasks whose compatibility marker this process does
    not support are left ready, as a worker of another build would find them.
    """
    ran = 0
    markers = compatibility.local_markers()
    while ran < max_tasks:
        batch = tasks.ready_and_due(now=clock.now(), limit=100, markers=markers)
        if not batch:
            return ran
        for task in batch:
            run_task(task)
            ran += 1
    raise RuntimeError(f"run_ready_tasks stopped after {max_tasks} tasks; is a workflow looping?")
