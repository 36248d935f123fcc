"""Running one task in this process, through the executor function a worker would call.

Shared by Celery's eager mode (``transport/eager.py``) and the testing kit's inline
runner (``testing/inline.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_workflow.executor.activity_task import run_activity_task
from durable_workflow.executor.timer_task import run_timer_task
from durable_workflow.executor.workflow_task import run_workflow_task
from durable_workflow.store.records import TaskRecord

_RUNNERS: dict[str, Callable[[Any], Any]] = {
    "workflow": run_workflow_task,
    "activity": run_activity_task,
    "timer": run_timer_task,
}


def run_task(task: TaskRecord) -> str:
    """Run ``task`` here; returns its outcome as the executor reports it."""
    return str(_RUNNERS[task.task_type](task.id))
