"""An activity task: claim (transaction 1), run user code (``invocation``), settle
(transaction 2, ``settlement``).

An eager activity skips the claim: the workflow task that schedules it starts it
(:func:`start_eagerly`), and its settle also runs the workflow task it wakes.
User code runs outside any transaction. The claim hands out a fencing token
(lease id + generation); settlement is accepted only while that exact token
still owns the task, so a late report from an attempt that lost its lease is
answered "stale" and writes nothing.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

from django.db import DatabaseError

from durable_workflow import clock, logs
from durable_workflow.conf import get_settings
from durable_workflow.executor import (
    async_attempts,
    async_completion,
    compatibility,
    dispatch,
    eager,
    fan_out,
    handback,
    lifecycle,
    queue_gate,
    session_tasks,
    settlement,
    speculation,
)
from durable_workflow.executor.attempts import Lease, begin
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.handback import held
from durable_workflow.executor.heartbeat import heartbeat
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.invocation import COMPLETES_LATER, attempt_of, invoke_activity
from durable_workflow.executor.lease_keeper import keeper
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.logs import get_logger
from durable_workflow.models import TERMINAL_RUN_STATUSES, ActivityStatus, TaskStatus, WorkflowRun
from durable_workflow.store import activities, runs, sql, tasks

logger = get_logger("durable_workflow")


def run_activity_task(task_id: uuid.UUID | str) -> ActivityOutcome:
    """Execute one activity attempt; returns what it came to (``ActivityTaskOutcome``,
    in ``outcomes.py``, says what each value means)."""
    with logs.scope():  # the run is bound once read (``_claim``)
        lease = _claim(task_id)
        outcome = ActivityOutcome.SKIPPED if lease is None else run_claimed(lease)
    if lease is not None and queue_gate.limited(lease.execution.queue):
        queue_gate.wake(lease.execution.queue)  # its slot is free now
    eager.drain()
    return outcome


def run_claimed(lease: Lease) -> ActivityOutcome:
    """Run a claimed attempt's user code and settle it; if that fails (its connection
    was killed, say), the task is handed back at once for another attempt."""
    if async_attempts.off_slot(lease.execution):
        return async_attempts.submit(lease)  # runs on this process's event loop
    with logs.attempt_scope(lease), handback.on_failure([held(lease)]):
        return _run_claimed(lease)


def _run_claimed(lease: Lease) -> ActivityOutcome:
    started = time.monotonic()
    with keeper.keeping([held(lease)], lease_seconds=get_settings().ACTIVITY_LEASE_SECONDS):
        ok, value = _invoke(lease)
    assumed = speculation.take(lease)
    if value is COMPLETES_LATER:
        return async_completion.hand_over(lease)
    if not ok:
        return settlement.settle(lease, ok, value)
    quick = time.monotonic() - started < fan_out.QUICK_SECONDS
    if assumed is not None:
        try:
            return settlement.settle_results([(lease, value)], quick=quick, assumed=assumed)[0]
        except DatabaseError as exc:
            if not sql.refuted(exc):
                raise
            speculation.refute(lease.run_id)
            logger.debug("run %s was not as assumed: the step is settled as usual", lease.run_id)
    return settlement.settle_results([(lease, value)], quick=quick)[0]


def run_claimed_together(leases: list[Lease]) -> list[ActivityOutcome]:
    """Run fan-out members taken together, one after the other, and settle their results
    in one transaction (a failed attempt is settled on its own, at once). Async ones
    go to this process's event loop."""
    on_loop = [lease for lease in leases if async_attempts.off_slot(lease.execution)]
    leases = [lease for lease in leases if lease not in on_loop]
    outcomes = [async_attempts.submit(lease) for lease in on_loop]
    if not leases:
        return outcomes
    with handback.on_failure([held(lease) for lease in leases]):
        return outcomes + _run_claimed_together(leases)


def _run_claimed_together(leases: list[Lease]) -> list[ActivityOutcome]:
    results: list[tuple[Lease, Any]] = []
    outcomes: list[ActivityOutcome] = []
    started = time.monotonic()
    for lease in leases:
        with logs.attempt_scope(lease):
            with keeper.keeping([held(lease)], lease_seconds=get_settings().ACTIVITY_LEASE_SECONDS):
                ok, value = _invoke(lease)
            if value is COMPLETES_LATER:
                outcomes.append(async_completion.hand_over(lease))
            elif ok:
                results.append((lease, value))
            else:
                outcomes.append(settlement.settle(lease, ok, value))
    quick = (time.monotonic() - started) / len(leases) < fan_out.QUICK_SECONDS
    return outcomes + (settlement.settle_results(results, quick=quick) if results else [])


@retry_transaction
def _claim(task_id: uuid.UUID | str) -> Lease | None:
    now = clock.now()
    settings = get_settings()
    with sql.atomic(WorkflowRun):
        task = tasks.get(task_id)
        if task is None or task.status != TaskStatus.READY or task.activity_execution_id is None:
            return None  # e.g. taken by the worker of a fan-out sibling
        if task.available_at > now:
            dispatch.enqueue(task)  # a retry's back-off outlasted the broker countdown
            return None
        if compatibility.refuse(task):
            return None
        # Read before the run lock, to hold it briefly: whatever closes the execution
        # meanwhile also cancels this task, and the claim below only takes a ready task.
        execution = activities.get_execution(task.activity_execution_id)
        run = runs.lock_run(task.run_id)
        logs.bind(run, activity_id=task.activity_execution_id)
        if (
            run is not None
            and execution is not None
            and execution.options.get("worker_session")
            and run.status not in TERMINAL_RUN_STATUSES
            and execution.status in (ActivityStatus.PENDING, ActivityStatus.RUNNING)
            and not session_tasks.admitted(task, run, execution, now=now)
        ):
            return None
        if (
            run is not None
            and run.status not in TERMINAL_RUN_STATUSES
            and execution is not None
            and execution.status in (ActivityStatus.PENDING, ActivityStatus.RUNNING)
            and not queue_gate.admit(task, now=now)
        ):
            return None  # waits for a free slot; the engine sends it again then
        claimed = tasks.claim(
            task, owner=worker_id(), now=now, lease_seconds=settings.ACTIVITY_LEASE_SECONDS
        )
        if run is None or claimed is None or claimed.lease_id is None:
            return None
        queue_gate.admitted(claimed.queue, now=now)
        if run.status in TERMINAL_RUN_STATUSES or execution is None:
            tasks.settle(claimed.id, TaskStatus.CANCELLED, now=now)
            return None
        if execution.status not in (ActivityStatus.PENDING, ActivityStatus.RUNNING):
            tasks.settle(claimed.id, TaskStatus.COMPLETED, now=now)
            return None
        lease, started = begin(run, claimed, execution, now=now)
        lifecycle.append(run, [started], now=now)
        runs.save_run(run, now=now)
    return lease


def _invoke(lease: Lease) -> tuple[bool, Any]:
    return invoke_activity(
        lease.execution,
        attempt=attempt_of(lease),
        payload_codec=lease.payload_codec,
        heartbeat=functools.partial(heartbeat, lease),
    )


eager.handle(eager.ACTIVITY, run_claimed)
eager.handle(eager.ACTIVITIES, run_claimed_together)
