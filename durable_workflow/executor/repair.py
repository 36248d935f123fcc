"""The repair pass: nothing ready may stay idle, no expired lease may strand work.

Celery messages are only wake-ups. When one is lost (broker restart, worker
killed before ack), the database still says what is ready; this pass finds it
and sends the message again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from django.db import transaction

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_when_locked
from durable_workflow.models import TaskType
from durable_workflow.store import activities, runs, tasks
from durable_workflow.store.records import TaskRecord

logger = logging.getLogger("durable_workflow")


@dataclasses.dataclass(frozen=True)
class RepairReport:
    reclaimed: int
    redispatched: int

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def repair_pass(*, now: dt.datetime | None = None) -> RepairReport:
    settings = get_settings()
    now = now or clock.now()
    reclaimed = 0
    for task in tasks.expired_leases(now=now, limit=settings.REPAIR_SCAN_LIMIT):
        reclaimed += _reclaim(task, now)
    due = tasks.due_for_redispatch(
        now=now,
        after_seconds=settings.REDISPATCH_AFTER_SECONDS,
        max_backoff=settings.REDISPATCH_MAX_BACKOFF_SECONDS,
        limit=settings.REPAIR_SCAN_LIMIT,
    )
    for task in due:
        dispatch.backend().send(task, None)
    tasks.mark_dispatched([t.id for t in due], now=now)
    if reclaimed or due:
        logger.info("repair pass: %s leases reclaimed, %s tasks re-sent", reclaimed, len(due))
    return RepairReport(reclaimed=reclaimed, redispatched=len(due))


@retry_when_locked
def _reclaim(task: TaskRecord, now: dt.datetime) -> int:
    with transaction.atomic():
        runs.lock_run(task.run_id)
        if not tasks.reclaim_expired(task.id, task.lease_generation, now=now):
            return 0
        if task.task_type == TaskType.ACTIVITY and task.activity_execution_id is not None:
            execution = activities.get_execution(task.activity_execution_id)
            if execution is not None:
                activities.expire_attempt(execution.current_attempt_id, now=now)
                activities.reopen_execution(execution.id)
        fresh = tasks.get(task.id)
        if fresh is not None:
            dispatch.enqueue(fresh)
    return 1
