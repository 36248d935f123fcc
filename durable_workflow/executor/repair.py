"""The repair pass: nothing ready may stay idle, no expired lease may strand work.

Celery messages are only wake-ups. When one is lost (broker restart, worker
killed before ack), the database still says what is ready; this pass finds it
and sends the message again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable

from durable_workflow import clock, logs, observe
from durable_workflow.conf import get_settings
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.exceptions import BrokerUnavailable
from durable_workflow.executor import dispatch, lifecycle, queue_gate, workflow_gate
from durable_workflow.executor.activity_failures import record_final_failure
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.in_flight import InFlight
from durable_workflow.executor.timeouts import enforce_due_timeouts
from durable_workflow.logs import get_logger
from durable_workflow.models import AttemptStatus, TaskStatus, TaskType
from durable_workflow.store import activities, database, runs, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord, TaskRecord

logger = get_logger("durable_workflow")


@dataclasses.dataclass(frozen=True)
class RepairReport:
    reclaimed: int
    redispatched: int
    timed_out: int = 0
    #: Stalled bulk jobs whose message was sent again (``operations.bulk``).
    bulk_jobs_resent: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def repair_pass(*, now: dt.datetime | None = None) -> RepairReport:
    try:
        report = _repair_pass(now)
    except Exception:
        observe.repair_pass(None)
        raise
    observe.repair_pass(report)
    return report


def _repair_pass(now: dt.datetime | None) -> RepairReport:
    settings = get_settings()
    now = now or clock.now()
    reclaimed = 0
    timed_out = enforce_due_timeouts(now=now, limit=settings.REPAIR_SCAN_LIMIT)
    for task in tasks.expired_leases(now=now, limit=settings.REPAIR_SCAN_LIMIT):
        reclaimed += _reclaim(task, now)
    due = tasks.due_for_redispatch(
        now=now,
        after_seconds=settings.REDISPATCH_AFTER_SECONDS,
        max_backoff=settings.REDISPATCH_MAX_BACKOFF_SECONDS,
        limit=settings.REPAIR_SCAN_LIMIT,
    )
    sent = _resend(_lost(due, now=now, in_backlog=settings.REDISPATCH_MAX_BACKOFF_SECONDS))
    tasks.mark_dispatched(sent, now=now)
    # Slots freed by reclaims, timeouts, lost wake-ups: activity queues, then run queues.
    woken = queue_gate.wake_all() + workflow_gate.wake_all()
    bulk_jobs = _resend_stalled_bulk_jobs(now)
    if reclaimed or sent or timed_out or woken or bulk_jobs:
        logger.info(
            "repair pass: %s timeouts enforced, %s leases reclaimed, %s tasks re-sent, "
            "%s sent for free queue slots, %s stalled bulk jobs re-sent",
            timed_out,
            reclaimed,
            len(sent),
            woken,
            bulk_jobs,
        )
    return RepairReport(
        reclaimed=reclaimed,
        redispatched=len(sent) + woken,
        timed_out=timed_out,
        bulk_jobs_resent=bulk_jobs,
    )


#: Sends stalled bulk jobs again, installed by ``operations/bulk.py`` (which the app's
#: ``ready()`` imports), so the executor imports no operation module.
_bulk_job_resender: list[Callable[[dt.datetime], int]] = []


def set_bulk_job_resender(resend: Callable[[dt.datetime], int]) -> None:
    """``resend(now)`` sends the stalled bulk jobs again and says how many."""
    _bulk_job_resender[:] = [resend]


def _resend_stalled_bulk_jobs(now: dt.datetime) -> int:
    """A bulk job is a Celery message too: one whose worker died is sent again."""
    return sum(resend(now) for resend in _bulk_job_resender)


def _lost(
    due: list[tuple[TaskRecord, dt.datetime | None]], *, now: dt.datetime, in_backlog: int
) -> list[TaskRecord]:
    """Of the ready tasks whose message is old enough to be presumed lost, those whose
    message cannot simply be on its way.

    A message still on its way (waiting in its queue, or held by a worker the
    registrations answer for: see ``in_flight.py``) would only be duplicated, and the
    duplicate skipped later (under a backlog that was most of what workers handled).
    One waiting in a queue is re-sent once it has been deliverable for ``in_backlog``
    seconds, since a queue may never empty; one a live worker holds is not re-sent
    however late. Any other message is lost and is re-sent now; so is every one when
    the broker can never say, the per-task back-off alone deciding. When it could but
    the read failed, any message may be held, for ``in_backlog`` seconds.
    """
    in_flight = InFlight(now=now, in_backlog=in_backlog)
    lost = [
        task
        for task, sent_at in due
        if sent_at is None or not in_flight.may_be(task, sent_at=sent_at)
    ]
    # Workers went on while the broker was asked: a message acknowledged meanwhile is
    # neither waiting nor held any more, but its task is no longer ready either.
    ready = tasks.still_ready([task.id for task in lost]) if lost else set()
    return [task for task in lost if task.id in ready]


def _resend(due: list[TaskRecord]) -> list[uuid.UUID]:
    """Send each task's message again; the ids of those sent.

    One bad route does not stop the others, but a broker that cannot be reached
    ends the pass (after noting what did go): the next pass tries again, and a
    ``--loop`` logs the outage once instead of once per task.
    """
    sent: list[uuid.UUID] = []
    for task in due:
        try:
            dispatch.backend().send(dispatch.routed(task), None)
        except BrokerUnavailable:
            tasks.mark_dispatched(sent, now=clock.now())
            raise
        except Exception:
            with logs.scope(run_id=task.run_id, activity_id=task.activity_execution_id):
                logger.exception("repair could not re-send %s task %s", task.task_type, task.id)
        else:
            sent.append(task.id)
    return sent


@retry_transaction
def _reclaim(task: TaskRecord, now: dt.datetime) -> int:
    with logs.scope(run_id=task.run_id, activity_id=task.activity_execution_id), database.atomic():
        run = runs.lock_run(task.run_id)
        logs.bind(run)
        if run is None or not reclaim_locked(run, task, now=now):
            return 0
        logger.info(
            "workflow %s: took back the expired lease of %s task %s",
            run.label(),
            task.task_type,
            task.id,
        )
        fresh = tasks.get(task.id)
        if fresh is not None and fresh.status == TaskStatus.READY:
            dispatch.enqueue(fresh)
    return 1


def reclaim_locked(run: RunRecord, task: TaskRecord, *, now: dt.datetime) -> bool:
    """Hand an expired lease out again, or give up on an activity that keeps dying.

    The caller holds the run lock and sends the message of a task left ready.
    ``False``: the lease was not expired any more (renewed, or reclaimed already).
    """
    if not tasks.reclaim_expired(task.id, task.lease_generation, now=now):
        return False
    lease_lost(run, task, now=now)
    return True


def lease_lost(run: RunRecord, task: TaskRecord, *, now: dt.datetime) -> None:
    """After a lease was taken back from its holder: its activity attempt counts as
    expired, and an activity that lost too many leases fails (the run lock is held)."""
    if task.task_type == TaskType.ACTIVITY and task.activity_execution_id is not None:
        execution = activities.get_execution(task.activity_execution_id)
        if execution is not None:
            activities.expire_attempt(execution.current_attempt_id, now=now)
            activities.reopen_execution(execution.id)
            expired = activities.expired_attempt_count(execution.id)
            if expired > get_settings().ACTIVITY_MAX_LEASE_EXPIRIES:
                _give_up(run, task, execution, expired, now=now)


def lease_returned(run: RunRecord, task: TaskRecord, *, now: dt.datetime) -> None:
    """After a holder handed its lease back because it is stopping: its activity attempt
    ends cancelled (not expired: no worker was lost), and the activity waits for another."""
    if task.task_type == TaskType.ACTIVITY and task.activity_execution_id is not None:
        execution = activities.get_execution(task.activity_execution_id)
        if execution is not None and execution.current_attempt_id is not None:
            activities.close_attempt(
                execution.current_attempt_id, AttemptStatus.CANCELLED, now=now, only_running=True
            )
            activities.reopen_execution(execution.id)


def _give_up(
    run: RunRecord, task: TaskRecord, execution: ActivityRecord, expired: int, *, now: dt.datetime
) -> None:
    tasks.settle(task.id, TaskStatus.FAILED, now=now, error="lease expired too often")
    info = FailureInfo(
        exception_type="ActivityLeaseExpired",
        exception_class="durable_workflow.exceptions.ActivityLeaseExpired",
        message=f"the activity lost its lease {expired} times (worker crashes or hangs)",
        category="timeout",
    )
    event = record_final_failure(
        run,
        execution,
        attempt_id=execution.current_attempt_id,
        attempt_number=execution.attempt_count,
        info=info,
        non_retryable=True,
        now=now,
    )
    lifecycle.append(run, [event], now=now)
    runs.save_run(run, now=now)
