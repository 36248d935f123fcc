"""Asynchronous activity completion: an attempt that ends without a result, completed later.

An activity that raises ``CompleteAsync`` hands its task back (``hand_over``):
the attempt stays ``running`` with its deadlines (start-to-close, heartbeat,
schedule-to-close), which the watchdog still enforces, and no lease is left to
expire. Whoever holds the attempt's task token then completes it, fails it
(the retry policy applies, as for a raised exception), heartbeats it or reports
it cancelled. Each report locks the run and is accepted only while the token's
attempt is the activity's current, running attempt: a late or repeated report
is refused with a reason and writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock
from durable_workflow.converter import payloads
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import NonRetryableError
from durable_workflow.executor import lifecycle, tokens
from durable_workflow.executor.activity_failures import retry_or_fail
from durable_workflow.executor.attempts import Lease, attempt_fields
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityStatus,
    AttemptStatus,
    TaskStatus,
    WorkflowRun,
)
from durable_workflow.store import activities, runs, sql, tasks
from durable_workflow.store.records import ActivityRecord, AttemptRecord, RunRecord

Event = tuple[str, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Report:
    """What happened to one report made through a task token."""

    accepted: bool
    outcome: str
    rejection_reason: str | None = None
    activity_id: str | None = None
    workflow_instance_id: str | None = None
    #: The workflow asked to cancel: stop the work and ``report_cancellation()``.
    cancel_requested: bool = False


@dataclasses.dataclass(frozen=True)
class _Held:
    """The token's attempt, checked current under the run lock."""

    run: RunRecord
    execution: ActivityRecord
    attempt: AttemptRecord

    # What ``retry_or_fail`` reads of a lease.
    @property
    def attempt_id(self) -> uuid.UUID:
        return self.attempt.id

    @property
    def attempt_number(self) -> int:
        return self.attempt.attempt_number

    @property
    def task_id(self) -> uuid.UUID | None:
        return self.attempt.task_id


def _refused(outcome: str, reason: str, held: _Held | None = None) -> Report:
    return Report(
        False,
        outcome,
        reason,
        str(held.execution.id) if held else None,
        held.run.instance_id if held else None,
    )


def hand_over(lease: Lease) -> ActivityOutcome:
    """``CompleteAsync`` was raised: release the task, keep the attempt open."""
    now = clock.now()
    with sql.atomic(WorkflowRun):
        run, held = sql.together(
            WorkflowRun,
            [
                runs.lock_statement(lease.run_id),
                tasks.settle_if_held_statement(
                    lease.task_id, lease.lease_id, lease.generation, TaskStatus.COMPLETED, now=now
                ),
            ],
        )
        if run is None or not held:
            return (
                ActivityOutcome.STALE
            )  # the lease was lost, or the token completed the attempt already
        if run.status in TERMINAL_RUN_STATUSES:
            activities.close_attempt(lease.attempt_id, AttemptStatus.CANCELLED, now=now)
            return ActivityOutcome.STALE
    return ActivityOutcome.COMPLETES_LATER


def owner_type(token: str) -> str | None:
    """The workflow type a token's activity belongs to (read without a lock), if any."""
    ids = tokens.read(token)
    execution = activities.get_execution(ids[0]) if ids is not None else None
    run = runs.get_run(execution.run_id) if execution is not None else None
    return run.workflow_type if run is not None else None


def _check(ids: tuple[uuid.UUID, uuid.UUID] | None) -> _Held | Report:
    """Lock the token's run and check its attempt may still report (or why not)."""
    if ids is None:
        return _refused("rejected_invalid_token", "invalid_token")
    execution_id, attempt_id = ids
    found = activities.get_execution(execution_id)
    run = runs.lock_run(found.run_id) if found is not None else None
    execution = activities.get_execution(execution_id)  # as it is under the lock
    attempt = activities.get_attempt(attempt_id)
    if run is None or execution is None or attempt is None:
        return _refused("rejected_not_found", "activity_not_found")
    held = _Held(run, execution, attempt)
    if execution.status not in (ActivityStatus.PENDING, ActivityStatus.RUNNING):
        return _refused("rejected_activity_closed", "activity_closed", held)
    if run.status in TERMINAL_RUN_STATUSES:
        return _refused("rejected_not_active", "run_not_active", held)
    if execution.current_attempt_id != attempt.id or attempt.status != AttemptStatus.RUNNING:
        return _refused("rejected_stale_attempt", "attempt_superseded", held)
    return held


def _accept(held: _Held, outcome: str, events: list[Event], *, now: dt.datetime) -> Report:
    if held.attempt.task_id is not None:  # reported before the worker handed it over
        tasks.settle(held.attempt.task_id, TaskStatus.COMPLETED, now=now)
    lifecycle.append(held.run, events, now=now)
    runs.save_run(held.run, now=now)
    return Report(True, outcome, None, str(held.execution.id), held.run.instance_id)


@retry_transaction
def complete(token: str, result: Any) -> Report:
    now = clock.now()
    ids = tokens.read(token)
    with sql.atomic(WorkflowRun):
        held = _check(ids)
        if isinstance(held, Report):
            return held
        encoded = payloads.encode_value(result, held.run.payload_codec, "result")
        execution, attempt = held.execution, held.attempt
        activities.close_attempt(attempt.id, AttemptStatus.COMPLETED, now=now)
        activities.close_execution(execution.id, ActivityStatus.COMPLETED, now=now)
        wake_workflow(held.run, now=now)
        fields = attempt_fields(execution, attempt.id, attempt.attempt_number)
        event = (EventType.ACTIVITY_COMPLETED, {**fields, "result": encoded, **_BY_TOKEN})
        return _accept(held, "activity_completed", [event], now=now)


@retry_transaction
def fail(token: str, info: FailureInfo, error: BaseException | None = None) -> Report:
    """The attempt failed: retried after its back-off if attempts remain, else final.

    Without ``error`` (a failure described over HTTP) it is final when ``info`` says
    so or names a type the activity declared non-retryable.
    """
    now = clock.now()
    ids = tokens.read(token)
    with sql.atomic(WorkflowRun):
        held = _check(ids)
        if isinstance(held, Report):
            return held
        if error is None:
            declared = held.execution.options.get("non_retryable_error_types") or []
            final = info.non_retryable or info.exception_type in declared
            error = NonRetryableError(info.message) if final else RuntimeError(info.message)
        base = {**attempt_fields(held.execution, held.attempt.id, held.attempt.attempt_number)}
        outcome, events = retry_or_fail(held, held.run, error, info, base, now=now)
        events = [(kind, {**payload, **_BY_TOKEN}) for kind, payload in events]
        return _accept(held, f"activity_{outcome}", events, now=now)


@retry_transaction
def heartbeat(token: str, progress: dict[str, Any] | None) -> Report:
    """Record a heartbeat (it renews the heartbeat deadline); refused once the workflow
    asked to cancel, so the holder stops and reports the cancellation."""
    now = clock.now()
    ids = tokens.read(token)
    with sql.atomic(WorkflowRun):
        held = _check(ids)
        if isinstance(held, Report):
            return held
        run, execution, attempt = held.run, held.execution, held.attempt
        if run.cancel_requested_at and execution.scheduled_at < run.cancel_requested_at:
            refused = _refused("rejected_cancel_requested", "cancel_requested", held)
            return dataclasses.replace(refused, cancel_requested=True)
        activities.record_heartbeat(
            execution.id,
            attempt.id,
            now=now,
            until=None,
            progress=progress,
            heartbeat_timeout=execution.options.get("heartbeat_timeout"),
        )
        payload: dict[str, Any] = {
            "sequence": execution.sequence,
            "activity_execution_id": str(execution.id),
            "activity_attempt_id": str(attempt.id),
            "heartbeat_at": now.isoformat(),
            **_BY_TOKEN,
        }
        if progress:
            payload["progress"] = progress
        lifecycle.append(run, [(EventType.ACTIVITY_HEARTBEAT_RECORDED, payload)], now=now)
        runs.save_run(run, now=now)
    return Report(True, "heartbeat_recorded", None, str(execution.id), run.instance_id)


@retry_transaction
def report_cancellation(token: str) -> Report:
    """The holder stopped because the workflow asked it to: the attempt ends cancelled
    (the run's closing records ``ActivityCancelled`` for the activity)."""
    now = clock.now()
    ids = tokens.read(token)
    with sql.atomic(WorkflowRun):
        held = _check(ids)
        if isinstance(held, Report):
            return held
        activities.close_attempt(held.attempt.id, AttemptStatus.CANCELLED, now=now)
        return _accept(held, "activity_cancelled", [], now=now)


#: Marks the events of reports made through a task token.
_BY_TOKEN = {"reported_by": "task_token"}
