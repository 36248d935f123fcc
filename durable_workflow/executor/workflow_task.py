"""A workflow task: lock the run, replay its history, persist what the body asked for.

All of it happens in one transaction. If replay hits an engine-level error
(non-determinism, a body touching the ORM, an unknown workflow type), the
savepoint is rolled back, the task is marked failed with the reason, and the
run itself is left exactly as it was, ready for ``repair`` once code is fixed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from typing import Any

from django.db import DatabaseError

from durable_workflow import clock, logs, observe
from durable_workflow.conf import get_settings
from durable_workflow.engine import gcpause
from durable_workflow.engine.commands import FailWorkflow
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.failures import INTERRUPTS, BodyFailed, describe
from durable_workflow.engine.outbox import LocalRequest
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.exceptions import (
    NonDeterminismError,
    NonDeterministicCallError,
    PayloadCodecError,
    StructuralLimitExceeded,
    UnknownTypeError,
    UnresolvedFailureError,
    WorkflowOrmAccessError,
)
from durable_workflow.executor import (
    affinity,
    compatibility,
    dispatch,
    eager,
    handback,
    hooks,
    lifecycle,
    local_activities,
    parking,
    poison,
    sticky,
    workflow_gate,
)
from durable_workflow.executor.attempts import start_eagerly
from durable_workflow.executor.children import report_children
from durable_workflow.executor.common import (
    engine_limits,
    failure_types,
    orm_guard,
    retry_transaction,
    workflow_task_row,
)
from durable_workflow.executor.feeding import feed_and_persist
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.lease_keeper import keeper
from durable_workflow.executor.local_activities import LocalLease
from durable_workflow.executor.outcomes import WorkflowTaskOutcome as Outcome
from durable_workflow.executor.persist import close
from durable_workflow.executor.streams import deliver_pending
from durable_workflow.executor.timeouts import expired_deadline, time_out_run
from durable_workflow.logs import get_logger
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    FailureCategory,
    RunStatus,
    TaskStatus,
    WorkflowRun,
)
from durable_workflow.store import database, history, runs, savepoints, sql, tasks
from durable_workflow.store.records import RunRecord, TaskRecord

logger = get_logger("durable_workflow")

#: Errors that mean "this code cannot make progress on this history" (``BodyFailed``: the
#: body raised what its workflow does not declare as a failure of the run).
TASK_FAILURES = (
    NonDeterminismError,
    NonDeterministicCallError,
    WorkflowOrmAccessError,
    UnknownTypeError,
    PayloadCodecError,
    UnresolvedFailureError,
    BodyFailed,
)


@dataclasses.dataclass
class _Pending:
    """A workflow task paused while one of its local activities runs."""

    runtime: WorkflowRuntime
    lease: LocalLease


def run_workflow_task(task_id: uuid.UUID | str, *, redelivered: bool = False) -> Outcome:
    """Execute one workflow task; returns what it came to (``WorkflowTaskOutcome``, in
    ``outcomes.py``, says what each value means).

    ``redelivered``: the broker delivers this message again (an earlier delivery may
    have died with its worker), see ``poison``."""
    outcome = run_once(task_id, redelivered=redelivered)
    eager.drain()
    return outcome


def run_once(task_id: uuid.UUID | str, *, redelivered: bool = False) -> Outcome:
    """One workflow task, without the follow-ups it hands to this process.

    An error (other than a database connection error) is counted on the task, which is
    parked once it used up ``WORKFLOW_TASK_MAX_ATTEMPTS`` (``failed``); an interrupt is
    not counted, and goes on up."""
    attempt = poison.Attempt(task_id, redelivered=redelivered)
    started, outcome = time.monotonic(), "error"  # the metric's label when it raises
    with logs.scope():  # the run is bound once read (``_start_once``)
        try:
            outcome = _run_once(attempt)
            return outcome
        finally:
            workflow_type = logs.current()["dw_workflow_type"]
            observe.workflow_task(workflow_type, outcome, time.monotonic() - started)


def _run_once(attempt: poison.Attempt) -> Outcome:
    task_id = attempt.task_id
    try:
        outcome = _start(task_id, attempt)
        if isinstance(outcome, _Pending):
            attempt.counted = True  # its claim committed
        return finish_pending(outcome)
    except INTERRUPTS:
        poison.interrupted(attempt)
        raise
    except Exception as exc:
        if poison.failed(attempt, exc):
            return Outcome.FAILED
        raise


def finish_pending(outcome: Outcome | _Pending) -> Outcome:
    """Run the local activities a workflow task pauses for, one after the other; if that
    fails, the workflow task is handed back at once for another worker."""
    while isinstance(outcome, _Pending):
        task = outcome.lease.task
        assert task.lease_id is not None
        holds = [handback.Held(task.id, task.lease_id, task.lease_generation)]
        seconds = get_settings().WORKFLOW_TASK_LEASE_SECONDS
        with handback.on_failure(holds), logs.attempt_scope(outcome.lease):
            with keeper.keeping(holds, lease_seconds=seconds):
                ok, value = local_activities.run_attempt(outcome.lease)  # no transaction
            outcome = _resume(outcome, ok, value)
    return outcome


def _start(task_id: uuid.UUID | str, attempt: poison.Attempt | None = None) -> Outcome | _Pending:
    attempt = attempt or poison.Attempt(task_id)
    outcome = _start_checked(attempt)
    # An earlier attempt may have died: count this one first. Counted, it needs no mark
    # any more; a task found taken or settled by the count is asked for again, and may
    # be ready again by then.
    while outcome is poison.MARK:
        if poison.mark(attempt):
            return Outcome.FAILED  # it was the one too many: parked
        outcome = _start_checked(attempt)
    return outcome


def _start_checked(attempt: poison.Attempt) -> Outcome | _Pending | poison.Mark:
    try:
        return _start_once(attempt)
    except DatabaseError as exc:
        if not sql.refuted(exc):
            raise
    # The task changed between its read and the claim (a writer that took no run lock):
    # read it again.
    return _start_once(attempt)


@retry_transaction
def _start_once(attempt: poison.Attempt) -> Outcome | _Pending | poison.Mark:
    """The task claimed and advanced; ``poison.MARK`` when the attempt must be counted
    before it may run."""
    task_id = attempt.task_id
    now = clock.now()
    settings = get_settings()
    with sql.atomic(WorkflowRun):
        # One round trip: the run's lock (found through the task), then the task and the
        # events after the run's last workflow task (all a warm body, or a new run's
        # first task, needs), both read once the lock is held.
        run_id = tasks.run_of_statement(task_id)
        run, task, tail = sql.together(
            WorkflowRun,
            [
                runs.lock_statement(run_id),
                tasks.get_statement(task_id),
                history.tail_statement(run_id, runs.workflow_task_sequence_statement(run_id)),
            ],
        )
        if task is None or task.status != TaskStatus.READY or run is None:
            return Outcome.SKIPPED
        logs.bind(run)
        if workflow_gate.refuse(run, task, now=now):
            return Outcome.QUEUED  # the run waits for a slot; sent again when one frees
        if task.available_at > now:
            # Written by a process whose clock is ahead of this one's: the claim would be
            # refused, so ask again when the task is due here (as timer tasks do).
            dispatch.enqueue(task)
            return Outcome.EARLY
        if compatibility.refuse(task):
            return Outcome.INCOMPATIBLE
        replay_mode, owner_queue = affinity.decide(task, now=now)
        if owner_queue is not None:
            affinity.hand_over(task, owner_queue, now=now)  # the run is warm elsewhere
            return Outcome.HELD
        if run.status == RunStatus.RUNNING and tasks.workflow_task_in_progress(
            run.id, now=now, besides=task.id
        ):
            # A local activity of this run is running under another task's lease: try later.
            tasks.release(task.id, available_at=now + dt.timedelta(seconds=1), now=now)
            released = tasks.get(task.id)
            assert released is not None  # released just now, under the run's lock
            dispatch.enqueue(released)
            return Outcome.BUSY
        if poison.needs_mark(task, attempt):
            return poison.MARK
        claimed = _claim(
            task,
            now=now,
            lease_seconds=settings.WORKFLOW_TASK_LEASE_SECONDS,
            mode=replay_mode,
            count=not attempt.counted,
        )
        if claimed is None:
            return Outcome.SKIPPED
        waited = (now - task.available_at).total_seconds()
        observe.task_started("workflow", task.queue, task.connection, waited)
        if run.status in TERMINAL_RUN_STATUSES:
            tasks.settle(claimed.id, TaskStatus.CANCELLED, now=now)
            return Outcome.SKIPPED
        expired = expired_deadline(run, now)
        if expired is not None:
            time_out_run(run, *expired, now=now)
            tasks.settle(claimed.id, TaskStatus.COMPLETED, now=now)
            return Outcome.TIMED_OUT
        if claimed.payload.get("absorb"):  # child outcomes or messages arrived
            lifecycle.append(run, report_children(run) + deliver_pending(run), now=now)
        runtime = _runtime_for(run)
        # What the body has not seen: what it kept from its last task (up to the run's
        # last workflow task), then the tail read under the lock.
        runtime.unfed = [
            e for e in runtime.unfed if e.sequence <= run.workflow_task_sequence
        ] + tail
        return _advance_and_settle(run, claimed, runtime, now=now)


def _claim(
    task: TaskRecord, *, now: dt.datetime, lease_seconds: int, mode: str, count: bool
) -> TaskRecord | None:
    """Claim the task read under the run lock: assumed to succeed, and checked with the
    task's writes (where writes are batched), or read back at once. ``count``: the claim
    counts the attempt (``False``: it was counted in advance). ``None``: another worker
    has it."""
    owner = worker_id()
    if not sql.batching(WorkflowRun):
        statement = tasks.claim_statement(
            task, owner=owner, now=now, lease_seconds=lease_seconds, replay_mode=mode, count=count
        )
        claimed: TaskRecord | None = sql.together(WorkflowRun, [statement])[0]
        return claimed
    expectation, leased = tasks.claim_expected(
        task, owner=owner, now=now, lease_seconds=lease_seconds, replay_mode=mode, count=count
    )
    sql.defer_all(WorkflowRun, [expectation])
    return leased


@retry_transaction
def _resume(pending: _Pending, ok: bool, value: Any) -> Outcome | _Pending:
    now = clock.now()
    lease = pending.lease
    with sql.atomic(WorkflowRun):
        task = lease.task
        assert task.lease_id is not None
        run = runs.lock_run(lease.run_id)
        if run is None or not tasks.still_held(task.id, task.lease_id, task.lease_generation):
            pending.runtime.dispose()  # the lease was lost: another worker redoes the task
            return Outcome.STALE
        if run.status in TERMINAL_RUN_STATUSES:
            pending.runtime.dispose()
            tasks.settle(task.id, TaskStatus.CANCELLED, now=now)
            return Outcome.SKIPPED
        if local_activities.finish_attempt(run, lease, ok, value, now=now) == "retry":
            pending.runtime.dispose()
            tasks.settle(task.id, TaskStatus.COMPLETED, now=now)
            run.set(status=RunStatus.WAITING)
            runs.save_run(run, now=now)
            return Outcome.RETRYING
        return _advance_and_settle(run, task, pending.runtime, now=now)


def continue_here(run: RunRecord, *, now: dt.datetime) -> bool:
    """Run the woken workflow task in the caller's transaction (it holds the run lock and
    has just recorded the activity's outcome): one transaction for the whole step.

    The caller has checked that no workflow task is ready (one may carry news to
    absorb). The task's row is inserted with its outcome, already settled when it
    completes. ``False``: the caller wakes the workflow the regular way instead,
    because a run deadline has passed (the regular task times the run out) or an
    error rolled this back (``run`` is then put back as it was): an engine-level
    failure or a structural limit is then met again, and recorded, by the regular
    task, under its own savepoint. A database error fails the caller's transaction
    as a whole.
    """
    if expired_deadline(run, now) is not None:
        return False
    before = dataclasses.replace(run, dirty=set(run.dirty), appended=list(run.appended))
    runtime, started = None, time.monotonic()
    try:
        with logs.run_scope(run), savepoints.savepoint(WorkflowRun):
            row = workflow_task_row(run, now=now)
            mode, _ = affinity.decide(tasks.record_of(row), now=now)
            tasks.lease_new(
                row,
                owner=worker_id(),
                now=now,
                lease_seconds=get_settings().WORKFLOW_TASK_LEASE_SECONDS,
                replay_mode=mode,
            )
            runtime = _runtime_for(run)
            outcome = _advance_and_settle(run, tasks.record_of(row), runtime, now=now, unsaved=row)
    except (Exception, *INTERRUPTS) as exc:
        if runtime is not None:
            runtime.dispose()
        if isinstance(exc, DatabaseError):
            # A statement may have failed before the savepoint: the whole transaction
            # is lost (e.g. an assumed step refuted, see ``speculation``).
            raise
        if isinstance(exc, INTERRUPTS):
            # The activity's result still commits; the interrupt goes on after that.
            eager.interrupt_after_commit(exc)
        elif isinstance(exc, (StructuralLimitExceeded, *TASK_FAILURES)):
            logger.info("workflow %s: its task goes to a regular task: %s", run.label(), exc)
        else:
            logger.exception("workflow %s: its task could not continue in place", run.label())
        for field in dataclasses.fields(before):
            setattr(run, field.name, getattr(before, field.name))
        return False
    if isinstance(outcome, _Pending):
        eager.offer(eager.PENDING, outcome)
    named = outcome if isinstance(outcome, str) else "local_activity"
    observe.workflow_task(run.workflow_type, named, time.monotonic() - started)
    return True


def _runtime_for(run: RunRecord) -> WorkflowRuntime:
    cls: Any = hooks.workflow_class(run.workflow_type)
    runtime = sticky.cache.take(run.id, run.workflow_task_sequence, cls)
    if runtime is None:
        runtime = WorkflowRuntime(
            factory=lambda: cls._dw_instantiate(runtime),
            workflow_id=run.instance_id,
            run_id=str(run.id),
            codec=run.payload_codec,
            workflow_class=cls,
        )
    runtime.limits = engine_limits()
    runtime.failure_types = failure_types()
    return runtime


def _advance_and_settle(
    run: RunRecord,
    task: TaskRecord,
    runtime: WorkflowRuntime,
    *,
    now: dt.datetime,
    unsaved: Any = None,
) -> Outcome | _Pending:
    """Advance the body; settle the task, or pause it for a local activity.

    ``unsaved``: the task's row, not inserted yet (:func:`continue_here`, whose
    savepoint takes back everything on any error, so none is handled here); it is
    inserted once the outcome is known.
    """
    runtime.task_attempt = max(task.attempt_count, 1)
    if unsaved is not None:
        request = _advance(run, runtime, now=now)
    else:
        try:
            try:
                with savepoints.savepoint(WorkflowRun):
                    request = _advance(run, runtime, now=now)
            except StructuralLimitExceeded as exc:
                # What the commands wrote went with the savepoint; the run fails instead.
                with savepoints.savepoint(WorkflowRun):
                    request = _advance(run, runtime, now=now, closing=structural_failure(exc))
        except TASK_FAILURES as exc:
            runtime.dispose()
            parking.park_on_error(run, task.id, exc, now=now)
            return Outcome.FAILED
    if request is not None and local_activities.give_up_if_exhausted(run, task, request, now=now):
        return _advance_and_settle(run, task, runtime, now=now, unsaved=unsaved)
    if request is not None:
        if unsaved is not None:
            tasks.save_tasks([unsaved])  # leased while the local activity runs
        lease = local_activities.begin_attempt(run, task, request, now=now)
        runs.save_run(run, now=now)
        _keep_tail(run, runtime)
        return _Pending(runtime=runtime, lease=lease)
    if unsaved is not None:
        tasks.save_tasks([tasks.settled(unsaved, TaskStatus.COMPLETED, now=now)])
    else:
        tasks.settle(task.id, TaskStatus.COMPLETED, now=now)
    runs.save_run(run, now=now)
    _keep_tail(run, runtime)
    return Outcome.COMPLETED


def _keep_tail(run: RunRecord, runtime: WorkflowRuntime) -> None:
    """Hand the runtime the events this transaction recorded after its feed."""
    runtime.unfed = [e for e in run.appended if e.sequence > runtime.last_sequence]


def _known_tail(run: RunRecord, runtime: WorkflowRuntime) -> list[HistoryEvent] | None:
    """The events the runtime has not seen, when this process wrote every one of them.

    Those are the ones its last transaction recorded after feeding it, and the ones
    this transaction recorded so far. Only when together they fill the whole gap up
    to the run's last sequence (read under the run lock, so nobody else wrote in
    between); otherwise ``None``: read them.
    """
    known: dict[int, HistoryEvent] = {e.sequence: e for e in runtime.unfed + run.appended}
    wanted = range(runtime.last_sequence + 1, run.next_sequence)
    if any(sequence not in known for sequence in wanted):
        return None
    return [known[sequence] for sequence in wanted]


def _advance(
    run: RunRecord,
    runtime: WorkflowRuntime,
    *,
    now: dt.datetime,
    closing: FailWorkflow | None = None,
) -> LocalRequest | None:
    """Feed the runtime what it has not seen, persist its commands; the local request if any.

    Raises ``StructuralLimitExceeded`` when the commands go past a limit; the caller
    rolls back and calls again with ``closing``: the run fails instead of persisting.
    """
    keep = False
    eager.take_held()  # nothing kept from a task that did not commit
    local_activities.fresh.executions.clear()
    with orm_guard():
        try:
            if closing is None:
                # A cold runtime reads and replays the whole run: one pause for both.
                with gcpause.paused_for(run.next_sequence - 1 - runtime.last_sequence):
                    # A warm runtime needs only the events after the ones it has seen.
                    tail = _known_tail(run, runtime)
                    if tail is None:
                        tail = history.load_history(run.id, after_sequence=runtime.last_sequence)
                    events = feed_and_persist(run, runtime, tail, now=now)
            else:
                events, runtime.closed = [], closing
            if runtime.closed is not None:
                events += close(
                    run, runtime.closed, now=now, unfinished=runtime.unfinished_updates()
                )
            else:
                run.set(status=RunStatus.WAITING)
            held = eager.take_held()  # an activity persist leased to this process
            if held is not None:
                task, execution, sole = held
                events.append(start_eagerly(run, task, execution, now=now, sole=sole))
            lifecycle.append(run, events, now=now)
            boundary = run.next_sequence - 1
            run.set(last_progress_at=now, workflow_task_sequence=boundary)
            requests = runtime.local_requests
            if runtime.closed is None and requests:
                keep = True
                run.set(status=RunStatus.RUNNING)
                # One at a time; the rest stay queued on the runtime for the next round.
                runtime.local_requests = requests[1:]
                return requests[0]
            runtime.local_requests = []
            if runtime.closed is None:
                keep = True
                affinity.record(run, now=now)
                database.on_commit(lambda: sticky.cache.put(run.id, runtime, boundary), robust=True)
            return None
        finally:
            if not keep:
                runtime.dispose()


def structural_failure(exc: StructuralLimitExceeded) -> FailWorkflow:
    info = describe(exc, category=FailureCategory.STRUCTURAL_LIMIT)
    details = {
        "structural_limit_kind": exc.kind,
        "structural_limit_value": exc.value,
        "structural_limit_configured": exc.configured,
    }
    return FailWorkflow(failure=dataclasses.replace(info, details=details))


eager.handle(eager.WORKFLOW, run_once)
eager.handle(eager.PENDING, finish_pending)
eager.handle(eager.CONTINUE, continue_here)
