"""Settling an activity attempt (transaction 2): its outcome recorded under the fencing token.

A result is recorded with ``ActivityCompleted``, and the settle goes on from there: it
wakes the workflow task the result is for (or runs it in this very transaction, for a
sequential step), or takes the next waiting members of a fan-out. A failure is retried
or recorded as final (``activity_failures``). A report from an attempt that lost its
lease is answered "stale" and writes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.engine.failures import describe
from durable_workflow.exceptions import ActivityCancelled
from durable_workflow.executor import affinity, eager, fan_out, lifecycle, poison, speculation
from durable_workflow.executor.activity_failures import retry_or_fail
from durable_workflow.executor.attempts import Lease, attempt_fields
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.logs import get_logger
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityStatus,
    AttemptStatus,
    FailureCategory,
    TaskStatus,
    WorkflowRun,
)
from durable_workflow.store import activities, runs, sql, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord

logger = get_logger("durable_workflow")


@retry_transaction
def settle(lease: Lease, ok: bool, value: Any) -> ActivityOutcome:
    """Record an attempt's outcome: a result envelope (``ok``, through
    :func:`settle_results`) or an exception."""
    if ok:
        return settle_results([(lease, value)])[0]
    now = clock.now()
    info = describe(value, category=FailureCategory.ACTIVITY)
    cancelling = isinstance(value, ActivityCancelled)
    status = TaskStatus.CANCELLED if cancelling else TaskStatus.FAILED
    with sql.atomic(WorkflowRun):
        # One round trip: the run lock, then the fencing settle.
        run, held = sql.together(
            WorkflowRun,
            [
                runs.lock_statement(lease.run_id),
                tasks.settle_if_held_statement(
                    lease.task_id,
                    lease.lease_id,
                    lease.generation,
                    status,
                    now=now,
                    error=info.traceback,
                ),
            ],
        )
        if run is None:
            return ActivityOutcome.STALE
        if not held:
            logger.info("stale report for activity %s ignored", lease.execution.id)
            return ActivityOutcome.STALE
        closed = run.status in TERMINAL_RUN_STATUSES
        if closed or cancelling:
            if closed and not cancelling:  # the attempt ends cancelled whatever happened
                tasks.settle(lease.task_id, TaskStatus.CANCELLED, now=now, error=info.traceback)
            # The run closed, or is being cancelled: closing the run records the
            # ActivityCancelled event for this execution.
            activities.close_attempt(lease.attempt_id, AttemptStatus.CANCELLED, now=now)
            return ActivityOutcome.CANCELLED if not closed else ActivityOutcome.STALE
        outcome, events = retry_or_fail(lease, run, value, info, _base(lease), now=now)
        lifecycle.append(run, events, now=now)
        runs.save_run(run, now=now)
    return outcome


@retry_transaction
def settle_results(
    results: list[tuple[Lease, Any]], *, quick: bool = False, assumed: Any = None
) -> list[ActivityOutcome]:
    """Record the results of completed attempts of one run in one transaction, and go
    on from there: run the workflow task they wake (a sequential step), or take the next
    waiting members of their fan-out (several after ``quick`` ones).

    ``assumed``: the run as this process last committed it, for one lease: the first
    round trip's answers are assumed, and checked with the writes (``speculation``).
    """
    now = clock.now()
    leases = [lease for lease, _ in results]
    first = leases[0]
    wanted = fan_out.wanted(quick)
    with sql.atomic(WorkflowRun):
        answers = None
        if assumed is not None:
            answers = speculation.assume(first, assumed, now=now)
        if answers is None:
            answers = _ask(leases, now=now, wanted=wanted)
        run, helds, (ready, others_open, calls, timers), found = answers
        outcomes = [ActivityOutcome.COMPLETED if held else ActivityOutcome.STALE for held in helds]
        for lease, held in zip(leases, helds, strict=True):
            if not held:
                logger.info("stale report for activity %s ignored", lease.execution.id)
        kept = [result for result, held in zip(results, helds, strict=True) if held]
        if run is None or not kept:
            return [ActivityOutcome.STALE] * len(leases)
        run.open_work = (calls, timers, others_open)  # for a closing in continue_here
        if run.status in TERMINAL_RUN_STATUSES:
            # The run closed first: the attempts end cancelled whatever they returned
            # (closing the run recorded ActivityCancelled for their executions).
            for lease, _ in kept:
                tasks.settle(lease.task_id, TaskStatus.CANCELLED, now=now)
                activities.close_attempt(lease.attempt_id, AttemptStatus.CANCELLED, now=now)
            return [ActivityOutcome.STALE] * len(leases)
        # The two questions were asked in statements of their own: a subquery of the
        # locking read would answer from before its wait.
        here = False
        if ready:
            wake_workflow(run, now=now, ready=True)  # that task reads these results too
        else:
            # A result after a lost lease (a task claimed again) may follow one whose
            # in-place workflow task killed its process and took that result with it:
            # the task goes the regular way then, its first attempt counted before it
            # runs (``poison``).
            retried = any(lease.generation > 1 for lease in leases)
            here = not retried and not others_open and _eager_ok(run, first.execution)
            if not here:
                flagged = dict(poison.COUNT_FIRST) if retried else None
                wake_workflow(run, now=now, ready=False, payload=flagged)
        events: list[tuple[str, dict[str, Any]]] = []
        for lease, value in kept:
            activities.close_attempt(lease.attempt_id, AttemptStatus.COMPLETED, now=now)
            activities.close_execution(lease.execution.id, ActivityStatus.COMPLETED, now=now)
            events.append((EventType.ACTIVITY_COMPLETED, {**_base(lease), "result": value}))
        if others_open and wanted:
            events += fan_out.take(run, first.execution, now=now, found=found, count=wanted)
        if here:
            # The workflow goes on in this very transaction: one per step.
            lifecycle.append(run, events, now=now)
            events = []
            if not eager.continue_here(run, now=now):
                follow_up = wake_workflow(run, now=now, eager=True)  # here, after commit
                if follow_up is not None:
                    eager.offer(eager.WORKFLOW, follow_up)
        lifecycle.append(run, events, now=now)
        runs.save_run(run, now=now)
    return outcomes


def _ask(leases: list[Lease], *, now: dt.datetime, wanted: int) -> speculation.SettleAnswers:
    """One round trip for a settle: the run lock, then (each statement reading what the
    lock let through) the fencing settles, whether a workflow task is waiting, whether
    another activity, a child call or a timer of the run is open, and, after a member
    taken from a fan-out, the siblings to take next."""
    first = leases[0]
    settles = [
        tasks.settle_if_held_statement(
            lease.task_id, lease.lease_id, lease.generation, TaskStatus.COMPLETED, now=now
        )
        for lease in leases
    ]
    mine = [lease.execution.id for lease in leases]
    # (Open calls and timers: what a closing would ask, should the run end here.)
    pending = speculation.questions_statement(first.run_id, mine)
    siblings: list[sql.Statement[Any]] = []
    if wanted and any(lease.fan_out for lease in leases):
        siblings = fan_out.statements(first.run_id, first.execution, now=now, count=wanted)
    statements: list[sql.Statement[Any]] = [runs.lock_statement(first.run_id), *settles]
    statements += [pending, *siblings]
    run, *rest = sql.together(WorkflowRun, statements)
    held = [bool(settled) for settled in rest[: len(settles)]]
    return speculation.SettleAnswers(run, held, rest[len(settles)], rest[len(settles) + 1 :])


def _base(lease: Lease) -> dict[str, Any]:
    return attempt_fields(lease.execution, lease.attempt_id, lease.attempt_number)


def _eager_ok(run: RunRecord, execution: ActivityRecord) -> bool:
    """Run the woken workflow task here only for a sequential step (the caller checks that
    no sibling activity is open: a fan-out is better served by one coalesced task) with
    the same routing."""
    settings = get_settings()
    return bool(
        settings.EAGER_WORKFLOW_TASKS
        and eager.allowed()
        and execution.queue == run.queue
        and execution.connection == run.connection
        and affinity.may_run_here(run, now=clock.now())  # not when it is warm elsewhere
    )
