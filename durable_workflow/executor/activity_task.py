"""An activity task: claim (transaction 1), run user code, settle (transaction 2).

An eager activity skips the claim: the workflow task that schedules it starts it
(:func:`start_eagerly`), and its settle also runs the workflow task it wakes.
User code runs outside any transaction. The claim hands out a fencing token
(lease id + generation); settlement is accepted only while that exact token
still owns the task, so a late report from an attempt that lost its lease is
answered "stale" and writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import inspect
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from durable_workflow import clock, interceptors, logs, observe, registry
from durable_workflow.conf import get_settings
from durable_workflow.converter import ACTIVITY, handle_signature, payloads
from durable_workflow.engine.events import EventType
from durable_workflow.engine.failures import INTERRUPTS, describe
from durable_workflow.exceptions import ActivityCancelled, CompleteAsync, NonRetryableError
from durable_workflow.executor import (
    affinity,
    async_attempts,
    async_completion,
    compatibility,
    dispatch,
    eager,
    fan_out,
    handback,
    hooks,
    lifecycle,
    poison,
    queue_gate,
    session_tasks,
    speculation,
    tokens,
)
from durable_workflow.executor.activity_failures import retry_or_fail
from durable_workflow.executor.attempts import Lease, attempt_fields, begin
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.heartbeat import heartbeat
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.lease_keeper import keeper
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.headers import stored
from durable_workflow.info import ActivityInfo, frozen_mapping
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
from durable_workflow.store.records import ActivityRecord

if TYPE_CHECKING:
    from durable_workflow.authoring.activity import ActivityContext

#: What ``invoke_activity`` returns for an attempt that completes later, by its token.
COMPLETES_LATER = object()

logger = get_logger("durable_workflow")


def run_activity_task(task_id: Any) -> ActivityOutcome:
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


def held(lease: Lease) -> handback.Held:
    return handback.Held(lease.task_id, lease.lease_id, lease.generation)


def _run_claimed(lease: Lease) -> ActivityOutcome:
    started = time.monotonic()
    with keeper.keeping([held(lease)], lease_seconds=get_settings().ACTIVITY_LEASE_SECONDS):
        ok, value = _invoke(lease)
    assumed = speculation.take(lease)
    if value is COMPLETES_LATER:
        return async_completion.hand_over(lease)
    if not ok:
        return _settle(lease, ok, value)
    quick = time.monotonic() - started < fan_out.QUICK_SECONDS
    if assumed is not None:
        try:
            return _settle_results([(lease, value)], quick=quick, assumed=assumed)[0]
        except DatabaseError as exc:
            if not sql.refuted(exc):
                raise
            speculation.refute(lease.run_id)
            logger.debug("run %s was not as assumed: the step is settled as usual", lease.run_id)
    return _settle_results([(lease, value)], quick=quick)[0]


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
                outcomes.append(_settle(lease, ok, value))
    quick = (time.monotonic() - started) / len(leases) < fan_out.QUICK_SECONDS
    return outcomes + (_settle_results(results, quick=quick) if results else [])


@retry_transaction
def _claim(task_id: Any) -> Lease | None:
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
        heartbeat=lambda details=None: heartbeat(lease, details),
    )


def attempt_of(lease: Lease) -> Attempt:
    return Attempt(
        instance_id=lease.instance_id,
        run_id=lease.run_id,
        workflow_type=lease.workflow_type,
        attempt_id=lease.attempt_id,
        attempt_number=lease.attempt_number,
        started_at=lease.started_at,
    )


@dataclasses.dataclass(frozen=True)
class Attempt:
    """Which attempt of which workflow's activity is about to run."""

    instance_id: str
    run_id: uuid.UUID
    workflow_type: str
    attempt_id: uuid.UUID
    attempt_number: int
    started_at: dt.datetime | None
    local: bool = False


def attempt_info(execution: ActivityRecord, attempt: Attempt) -> ActivityInfo:
    """``dw.activity_info()`` for an attempt about to run."""
    options = execution.options
    progress = execution.last_heartbeat_progress
    return ActivityInfo(
        activity_id=str(execution.id),
        activity_type=execution.activity_type,
        attempt=attempt.attempt_number,
        attempt_id=str(attempt.attempt_id),
        scheduled_at=execution.scheduled_at,
        started_at=attempt.started_at,
        heartbeat_details=frozen_mapping(progress) if progress else None,
        heartbeat_timeout=options.get("heartbeat_timeout"),
        start_to_close_timeout=options.get("start_to_close_timeout"),
        workflow_instance_id=attempt.instance_id,
        workflow_run_id=str(attempt.run_id),
        workflow_type=attempt.workflow_type,
        queue=execution.queue,
        task_token=None if attempt.local else tokens.make(execution.id, attempt.attempt_id),
        local=attempt.local,
        headers=frozen_mapping(stored(options)),
    )


def invoke_activity(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Any,
) -> tuple[bool, Any]:
    """Run the user's ``handle()``; returns (True, result envelope) or (False, exception).

    An activity that raised ``CompleteAsync`` returns ``(True, COMPLETES_LATER)``: its
    outcome will come through its task token. An ``async def handle()`` runs to its end
    here (a worker's Celery task hands it to the process's event loop instead:
    :func:`run_claimed`).
    """
    started = time.monotonic()
    ok, value = _invoke_handle(
        execution, attempt=attempt, payload_codec=payload_codec, heartbeat=heartbeat
    )
    outcome = "failed" if not ok else "async" if value is COMPLETES_LATER else "completed"
    observe.activity_attempt(execution, outcome, time.monotonic() - started)
    return ok, value


def _invoke_handle(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Any,
) -> tuple[bool, Any]:
    from durable_workflow.authoring.activity import running

    try:
        call, context = prepare_call(
            execution, attempt=attempt, payload_codec=payload_codec, heartbeat=heartbeat
        )
        with running(context):
            result = call()
            if inspect.isawaitable(result):
                result = async_attempts.run_to_end(result)
        return True, payloads.encode_value(result, payload_codec, "result")
    except CompleteAsync:
        if attempt.local:
            return False, NonRetryableError("a local activity cannot complete asynchronously")
        return True, COMPLETES_LATER
    except INTERRUPTS:
        raise  # the process is stopping: the caller hands the task back, uncounted
    except BaseException as exc:  # an activity failure is data, not a crash
        return False, exc


def _execute(
    execution: ActivityRecord, context: Any, input: interceptors.ExecuteActivityInput
) -> Any:
    """The innermost link of ``execute_activity``: the activity's ``handle()`` (or its mock)."""
    if input.activity is None:
        mock = hooks.activity_mocks[execution.activity_type]
        return mock(context, *input.args) if callable(mock) else mock
    return input.activity.handle(*input.args)


def prepare_call(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Any,
    aheartbeat: Any = None,
) -> tuple[Callable[[], Any], ActivityContext]:
    """The user's ``handle()`` (or its mock) bound to its decoded arguments, and the
    context it runs in."""
    from durable_workflow.authoring.activity import ActivityContext

    cls: Any = None
    mocked = execution.activity_type in hooks.activity_mocks
    if not mocked:
        cls = registry.activity_class(execution.activity_type)
    arguments = (
        payloads.decode_arguments(
            execution.arguments, handle_signature(cls), codec=payload_codec, receiver=ACTIVITY
        )
        or []
    )
    context = ActivityContext(
        workflow_id=attempt.instance_id,
        run_id=str(attempt.run_id),
        activity_id=str(execution.id),
        attempt_id=str(attempt.attempt_id),
        attempt_count=attempt.attempt_number,
        heartbeat=heartbeat,
        info=attempt_info(execution, attempt),
        aheartbeat=aheartbeat,
    )
    instance = None
    if not mocked:
        instance = cls()
        instance._dw_context = context
    executing = interceptors.ExecuteActivityInput(
        instance, list(arguments), context.info, dict(context.info.headers)
    )
    inner = functools.partial(_execute, execution, context)
    return functools.partial(interceptors.call, "execute_activity", executing, inner), context


def settle(lease: Lease, ok: bool, value: Any) -> ActivityOutcome:
    """Record an attempt's outcome: a result envelope (``ok``) or an exception."""
    return _settle(lease, ok, value)


@retry_transaction
def _settle(lease: Lease, ok: bool, value: Any) -> ActivityOutcome:
    """Record an attempt's outcome; a result goes through :func:`_settle_results`."""
    if ok:
        return _settle_results([(lease, value)])[0]
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
def _settle_results(
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
            answers = sql.together(WorkflowRun, _result_statements(leases, now=now, wanted=wanted))
        run, *asked = answers
        helds, ((ready, others_open, calls, timers), *found) = (
            asked[: len(leases)],
            asked[len(leases) :],
        )
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
        events = []
        for lease, value in kept:
            activities.close_attempt(lease.attempt_id, AttemptStatus.COMPLETED, now=now)
            activities.close_execution(
                lease.execution.id, ActivityStatus.COMPLETED, now=now, result=value
            )
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


def _result_statements(
    leases: list[Lease], *, now: dt.datetime, wanted: int
) -> list[sql.Statement]:
    """One round trip for a settle: the run lock, then (each statement reading what the
    lock let through) the fencing settles, whether a workflow task is waiting, whether
    another activity, a child call or a timer of the run is open, and, after a member
    taken from a fan-out, the siblings to take next."""
    first = leases[0]
    statements = [runs.lock_statement(first.run_id)]
    statements += [
        tasks.settle_if_held_statement(
            lease.task_id, lease.lease_id, lease.generation, TaskStatus.COMPLETED, now=now
        )
        for lease in leases
    ]
    mine = [lease.execution.id for lease in leases]
    # (Open calls and timers: what a closing would ask, should the run end here.)
    statements.append(sql.truths_statement(speculation.questions(first.run_id, mine)))
    if wanted and any(lease.fan_out for lease in leases):
        statements += fan_out.statements(first.run_id, first.execution, now=now, count=wanted)
    return statements


def _base(lease: Lease) -> dict[str, Any]:
    return attempt_fields(lease.execution, lease.attempt_id, lease.attempt_number)


def _eager_ok(run: Any, execution: ActivityRecord) -> bool:
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


eager.handle(eager.ACTIVITY, run_claimed)
eager.handle(eager.ACTIVITIES, run_claimed_together)
