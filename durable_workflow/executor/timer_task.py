"""A timer task: fire a due timer and wake the workflow. The row decides, not the broker."""

from __future__ import annotations

import uuid

from durable_workflow import clock, logs
from durable_workflow.engine.durations import whole_or_fraction
from durable_workflow.engine.events import EventType
from durable_workflow.executor import compatibility, dispatch, lifecycle
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.outcomes import TimerTaskOutcome as Outcome
from durable_workflow.models import TERMINAL_RUN_STATUSES, TaskStatus, TimerStatus
from durable_workflow.store import activities, database, runs, tasks


def run_timer_task(task_id: uuid.UUID | str) -> Outcome:
    """Fire one timer; returns what that came to (``TimerTaskOutcome``)."""
    with logs.scope():
        return _fire(task_id)


@retry_transaction
def _fire(task_id: uuid.UUID | str) -> Outcome:
    now = clock.now()
    with database.atomic():
        task = tasks.get(task_id)
        if task is None or task.status != TaskStatus.READY or task.timer_id is None:
            return Outcome.SKIPPED
        if task.available_at > now:
            dispatch.enqueue(task)  # a chunked countdown: wait for the rest
            return Outcome.EARLY
        if compatibility.refuse(task):
            return Outcome.INCOMPATIBLE
        run = runs.lock_run(task.run_id)
        logs.bind(run)
        claimed = tasks.claim(task, owner=worker_id(), now=now, lease_seconds=60)
        if run is None or claimed is None:
            return Outcome.SKIPPED
        timer = activities.get_timer(task.timer_id)
        if run.status in TERMINAL_RUN_STATUSES or timer is None:
            tasks.settle(claimed.id, TaskStatus.CANCELLED, now=now)
            return Outcome.SKIPPED
        tasks.settle(claimed.id, TaskStatus.COMPLETED, now=now)
        if timer.status != TimerStatus.PENDING or not activities.fire_timer(timer.id, now=now):
            return Outcome.SKIPPED
        lifecycle.append(
            run,
            [
                (
                    EventType.TIMER_FIRED,
                    {
                        "sequence": timer.sequence,
                        "timer_id": str(timer.id),
                        "delay_seconds": whole_or_fraction(timer.delay_seconds),
                        "fired_at": now.isoformat(),
                    },
                )
            ],
            now=now,
        )
        wake_workflow(run, now=now)
        runs.save_run(run, now=now)
    return Outcome.FIRED
