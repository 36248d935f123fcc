"""A timer task: fire a due timer and wake the workflow. The row decides, not the broker.

The workflow task the timer wakes runs in the same transaction when it may, as after
an activity's result (``eager.continue_here``): a timer then costs one transaction
and one message, not two of each.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db import DatabaseError

from durable_workflow import clock, logs
from durable_workflow.conf import get_settings
from durable_workflow.engine.durations import whole_or_fraction
from durable_workflow.engine.events import EventType
from durable_workflow.executor import affinity, compatibility, dispatch, eager, lifecycle, poison
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.outcomes import TimerTaskOutcome as Outcome
from durable_workflow.models import TERMINAL_RUN_STATUSES, TaskStatus, TimerStatus, WorkflowRun
from durable_workflow.store import activities, runs, sql, tasks
from durable_workflow.store.records import RunRecord, TaskRecord, TimerRecord


def run_timer_task(task_id: uuid.UUID | str, *, redelivered: bool = False) -> Outcome:
    """Fire one timer; returns what that came to (``TimerTaskOutcome``).

    ``redelivered``: the broker delivers this message again (an earlier delivery may
    have died with its worker, and with the workflow task run in place): the workflow
    is then woken the regular way, its task's first attempt counted (``poison``)."""
    with logs.scope():
        outcome = _fire(task_id, redelivered=redelivered)
    eager.drain()
    return outcome


def _fire(task_id: uuid.UUID | str, *, redelivered: bool) -> Outcome:
    try:
        return _fire_once(task_id, redelivered=redelivered)
    except DatabaseError as exc:
        if not sql.refuted(exc):
            raise
    # The task or the timer changed between the read and the write (a writer that took
    # no run lock): read them again.
    return _fire_once(task_id, redelivered=redelivered)


@retry_transaction
def _fire_once(task_id: uuid.UUID | str, *, redelivered: bool) -> Outcome:
    now = clock.now()
    with sql.atomic(WorkflowRun):
        # One round trip: the run's lock (found through the task), then the task, its
        # timer, and whether a workflow task is ready already, all read under the lock.
        run_id = tasks.run_of_statement(task_id)
        run, task, timer, truths = sql.together(
            WorkflowRun,
            [
                runs.lock_statement(run_id),
                tasks.get_statement(task_id),
                activities.timer_statement(tasks.timer_of_statement(task_id)),
                sql.truths_statement([tasks.ready_workflow_clause(run_id)]),
            ],
        )
        if task is None or task.status != TaskStatus.READY or task.timer_id is None:
            return Outcome.SKIPPED
        if task.available_at > now:
            dispatch.enqueue(task)  # a chunked countdown: wait for the rest
            return Outcome.EARLY
        if compatibility.refuse(task):
            return Outcome.INCOMPATIBLE
        if run is None:
            return Outcome.SKIPPED
        logs.bind(run)
        if run.status in TERMINAL_RUN_STATUSES or timer is None:
            _take(task, TaskStatus.CANCELLED, now=now)
            return Outcome.SKIPPED
        if not _take(task, TaskStatus.COMPLETED, now=now):
            return Outcome.SKIPPED
        if timer.status != TimerStatus.PENDING or not _fire_timer(timer, now=now):
            return Outcome.SKIPPED
        fired = {
            "sequence": timer.sequence,
            "timer_id": str(timer.id),
            "delay_seconds": whole_or_fraction(timer.delay_seconds),
            "fired_at": now.isoformat(),
        }
        lifecycle.append(run, [(EventType.TIMER_FIRED, fired)], now=now)
        retried = redelivered or task.dispatch_count > 1
        _wake(run, ready=truths[0], now=now, retried=retried)
        runs.save_run(run, now=now)
    return Outcome.FIRED


def _take(task: TaskRecord, status: str, *, now: dt.datetime) -> bool:
    """Claim the task read under the run lock and settle it with ``status``, in one
    write. ``False``: another worker has it."""
    return _one_row(tasks.take_statement(task, status, owner=worker_id(), now=now))


def _fire_timer(timer: TimerRecord, *, now: dt.datetime) -> bool:
    """Mark the pending timer read under the run lock fired."""
    return _one_row(activities.fire_timer_statement(timer.id, now=now))


def _one_row(statement: sql.Statement[int]) -> bool:
    """Whether ``statement`` wrote its one row: assumed, and checked with the
    transaction's writes, where writes are batched; else sent and read back at once."""
    if not sql.batching(WorkflowRun):
        return bool(sql.together(WorkflowRun, [statement])[0])
    sql.defer_all(WorkflowRun, [sql.expect_rows(statement, 1)])
    return True


def _wake(run: RunRecord, *, ready: bool, now: dt.datetime, retried: bool) -> None:
    """Run the workflow on from the timer: here, in this transaction, when it may; else
    through a workflow task (one that is ready already reads the timer too).

    ``retried``: this timer task may have run before and died with the workflow task
    it ran in place; that workflow task goes the regular way, counted first. ``ready``:
    a workflow task is ready already."""
    if ready or retried or not _here_ok(run, now):
        flagged = dict(poison.COUNT_FIRST) if retried and not ready else None
        wake_workflow(run, now=now, ready=ready, payload=flagged)
        return
    if not eager.continue_here(run, now=now):
        follow_up = wake_workflow(run, now=now, ready=False, eager=True)  # after commit
        if follow_up is not None:
            eager.offer(eager.WORKFLOW, follow_up)


def _here_ok(run: RunRecord, now: dt.datetime) -> bool:
    """May the woken workflow task run in this process? Not when eager workflow tasks
    are off or the message's chain is used up; nor when the run is warm in another live
    worker, unless its history is short enough to replay here (``_cheap_here``)."""
    settings = get_settings()
    if not (settings.EAGER_WORKFLOW_TASKS and eager.allowed()):
        return False
    return _cheap_here(run, settings.TIMER_REPLAY_IN_PLACE_MAX_EVENTS) or affinity.may_run_here(
        run, now=now
    )


def _cheap_here(run: RunRecord, max_events: int) -> bool:
    """Whether replaying ``run`` cold here costs less than the hop to its sticky owner.

    The hop is a message, a Celery task and a second transaction, and with many runs
    asleep the owner has mostly evicted the body by the time a timer wakes it, so it
    replays cold as well. A short history (``TIMER_REPLAY_IN_PLACE_MAX_EVENTS``, read
    from the run's locked row: no query) is replayed here instead. The workflow task then
    makes this process the run's owner (or clears the owner) and moves the run's
    workflow-task boundary, so the old owner's body no longer matches and is never used
    (``sticky.StickyCache.take``)."""
    return 0 < run.history_length <= max_events
