"""Local activities: run in the workflow task's own process, between two transactions.

1. The workflow task's transaction records ``ActivityScheduled`` (first attempt
   only) and ``ActivityStarted``, renews the workflow task's lease and commits
   *without* settling the task.
2. The activity runs with no transaction open. Its heartbeats renew the
   workflow task lease.
3. A new transaction checks the lease is still ours, records the outcome and,
   unless a retry is due later, lets the same warm runtime continue the body.

A retry is a new workflow task at ``now + backoff``. A worker that dies after
step 1 leaves ``ActivityStarted`` without an outcome; once the lease expires
the repair pass hands the task out again and the next attempt is recorded with
``retry_reason = cold_replay``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import threading
import uuid
from typing import Any

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import EventType
from durable_workflow.engine.failures import describe
from durable_workflow.engine.outbox import LocalRequest
from durable_workflow.exceptions import ActivityCancelled, DurableWorkflowError
from durable_workflow.executor import dispatch, lifecycle
from durable_workflow.executor.activity_failures import non_retryable, record_final_failure
from durable_workflow.executor.attempts import attempt_fields
from durable_workflow.executor.common import retry_transaction, workflow_task_row
from durable_workflow.executor.heartbeat import check_progress
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.invocation import Attempt, invoke_activity
from durable_workflow.models import TERMINAL_RUN_STATUSES, ActivityStatus, AttemptStatus
from durable_workflow.store import activities, database, runs, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord, TaskRecord

LOCAL = {"execution_mode": "local", "local_activity": True}


@dataclasses.dataclass(frozen=True)
class LocalLease:
    """The workflow task a local attempt runs under, and the attempt itself."""

    task: TaskRecord
    run_id: uuid.UUID
    instance_id: str
    payload_codec: str
    execution: ActivityRecord
    attempt_id: uuid.UUID
    attempt_number: int
    started_at: dt.datetime
    workflow_type: str = ""


def _lease_until(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(seconds=get_settings().WORKFLOW_TASK_LEASE_SECONDS)


class _Fresh(threading.local):
    """Local executions inserted by this thread's current workflow task, by (run, step):
    their first attempt starts without reading the row back. Reset by every advance."""

    def __init__(self) -> None:
        self.executions: dict[tuple[Any, int], ActivityRecord] = {}


fresh = _Fresh()


def begin_attempt(
    run: RunRecord, task: TaskRecord, request: LocalRequest, *, now: dt.datetime
) -> LocalLease:
    """Record the attempt's start inside the workflow task's transaction."""
    execution = fresh.executions.pop((run.id, request.step), None) or activities.execution_at_step(
        run.id, request.step
    )
    if execution is None:
        raise DurableWorkflowError(f"no local activity execution at step {request.step}")
    expires = _lease_until(now)
    assert task.lease_id is not None
    # The caller holds the run lock and this task's lease (claimed or checked in this
    # transaction), so the renewal needs no answer.
    tasks.renew_lease(task.id, task.lease_id, task.lease_generation, until=expires, checked=False)
    attempt_id, number = activities.start_attempt(
        execution,
        task_id=task.id,
        owner=worker_id(),
        lease_expires_at=expires,
        now=now,
        retry_reason=request.retry_reason,
    )
    payload = {
        **attempt_fields(execution, attempt_id, number),
        "workflow_task_id": str(task.id),
        "retry_reason": request.retry_reason,
        **LOCAL,
    }
    lifecycle.append(run, [(EventType.ACTIVITY_STARTED, payload)], now=now)
    return LocalLease(
        task=task,
        run_id=run.id,
        instance_id=run.instance_id,
        payload_codec=run.payload_codec,
        execution=execution,
        attempt_id=attempt_id,
        attempt_number=number,
        started_at=now,
        workflow_type=run.workflow_type,
    )


def give_up_if_exhausted(
    run: RunRecord, task: TaskRecord, request: LocalRequest, *, now: dt.datetime
) -> bool:
    """A crashed attempt past the attempt budget is not run again: the activity fails."""
    if request.retry_reason != "cold_replay":
        return False
    execution = activities.execution_at_step(run.id, request.step)
    if execution is None:
        return False
    budget = int(execution.options.get("max_attempts", 1))
    limit = max(budget, 1) + get_settings().ACTIVITY_MAX_LEASE_EXPIRIES if budget else 0
    if not limit or request.attempt_number <= limit:
        return False
    info = FailureInfo(
        exception_type="ActivityLeaseExpired",
        exception_class="durable_workflow.exceptions.ActivityLeaseExpired",
        message=f"the local activity's worker was lost {request.attempt_number - 1} times",
        category="timeout",
    )
    kind, payload = record_final_failure(
        run,
        execution,
        attempt_id=execution.current_attempt_id,
        attempt_number=request.attempt_number - 1,
        info=info,
        non_retryable=True,
        now=now,
        wake=False,
    )
    lifecycle.append(run, [(kind, {**payload, **LOCAL, "workflow_task_id": str(task.id)})], now=now)
    return True


def run_attempt(lease: LocalLease) -> tuple[bool, Any]:
    """Run the activity with no transaction open."""
    return invoke_activity(
        lease.execution,
        attempt=Attempt(
            instance_id=lease.instance_id,
            run_id=lease.run_id,
            workflow_type=lease.workflow_type,
            attempt_id=lease.attempt_id,
            attempt_number=lease.attempt_number,
            started_at=lease.started_at,
            local=True,
        ),
        payload_codec=lease.payload_codec,
        heartbeat=functools.partial(heartbeat, lease),
    )


@retry_transaction
def heartbeat(lease: LocalLease, details: Any = None) -> bool:
    """Renew the workflow task's lease and record the heartbeat (local marker)."""
    progress = check_progress(details)
    now = clock.now()
    until = _lease_until(now)
    with database.atomic():
        run = runs.lock_run(lease.run_id)
        cancel_at = run.cancel_requested_at if run is not None else None
        if (
            run is None
            or run.status in TERMINAL_RUN_STATUSES
            or (cancel_at is not None and lease.execution.scheduled_at < cancel_at)
        ):
            raise ActivityCancelled("the workflow run was cancelled or has closed")
        assert lease.task.lease_id is not None
        if not tasks.renew_lease(
            lease.task.id, lease.task.lease_id, lease.task.lease_generation, until=until
        ):
            return False
        activities.record_heartbeat(
            lease.execution.id, lease.attempt_id, now=now, until=until, progress=progress
        )
        payload: dict[str, Any] = {
            "sequence": lease.execution.sequence,
            "activity_execution_id": str(lease.execution.id),
            "activity_attempt_id": str(lease.attempt_id),
            "workflow_task_id": str(lease.task.id),
            "heartbeat_at": now.isoformat(),
            "lease_expires_at": until.isoformat(),
            **LOCAL,
        }
        if progress:
            payload["progress"] = progress
        lifecycle.append(run, [(EventType.ACTIVITY_HEARTBEAT_RECORDED, payload)], now=now)
        runs.save_run(run, now=now)
    return True


def finish_attempt(
    run: RunRecord, lease: LocalLease, ok: bool, value: Any, *, now: dt.datetime
) -> str:
    """Record the outcome (the caller holds the run lock and checked the task lease).

    Returns ``done`` when the body can go on now, ``retry`` when a later workflow
    task will run the next attempt.
    """
    execution = lease.execution
    base = {
        **attempt_fields(execution, lease.attempt_id, lease.attempt_number),
        "workflow_task_id": str(lease.task.id),
        **LOCAL,
    }
    policy = execution.options
    timeout_kind = _timeout_kind(policy, execution, lease, now)
    if ok and timeout_kind is None:
        activities.close_attempt(lease.attempt_id, AttemptStatus.COMPLETED, now=now)
        activities.close_execution(execution.id, ActivityStatus.COMPLETED, now=now)
        lifecycle.append(run, [(EventType.ACTIVITY_COMPLETED, {**base, "result": value})], now=now)
        return "done"
    if timeout_kind is not None:
        info = FailureInfo(
            exception_type="ActivityTimedOut",
            exception_class="durable_workflow.exceptions.ActivityTimeoutError",
            message=f"local activity {execution.activity_type} timed out ({timeout_kind})",
            category="timeout",
        )
        final = timeout_kind == "schedule_to_close"
    elif isinstance(value, ActivityCancelled):
        info = describe(value, category="cancelled")
        final = True
    else:
        info = describe(value, category="activity")
        final = non_retryable(value, policy.get("non_retryable_error_types") or [])
    activities.close_attempt(lease.attempt_id, AttemptStatus.FAILED, now=now)
    max_attempts = int(policy.get("max_attempts", 1))
    if not final and (max_attempts == 0 or lease.attempt_number < max_attempts):
        _schedule_retry(run, lease, base, info, timeout_kind, now=now)
        return "retry"
    kind, payload = record_final_failure(
        run,
        execution,
        attempt_id=lease.attempt_id,
        attempt_number=lease.attempt_number,
        info=info,
        non_retryable=final,
        now=now,
        wake=False,
    )
    if timeout_kind is not None:
        kind, payload = EventType.ACTIVITY_TIMED_OUT, {**payload, "timeout_kind": timeout_kind}
    lifecycle.append(run, [(kind, {**payload, **LOCAL})], now=now)
    return "done"


def _timeout_kind(
    policy: dict[str, Any], execution: ActivityRecord, lease: LocalLease, now: dt.datetime
) -> str | None:
    """Local timeouts are cooperative: checked when the attempt reports."""
    whole = policy.get("schedule_to_close_timeout")
    if whole and execution.scheduled_at + dt.timedelta(seconds=int(whole)) < now:
        return "schedule_to_close"
    attempt = policy.get("start_to_close_timeout")
    if attempt and lease.started_at + dt.timedelta(seconds=int(attempt)) < now:
        return "start_to_close"
    return None


def _schedule_retry(
    run: RunRecord,
    lease: LocalLease,
    base: dict[str, Any],
    info: FailureInfo,
    timeout_kind: str | None,
    *,
    now: dt.datetime,
) -> None:
    backoff = lease.execution.options.get("backoff") or [1]
    delay = int(backoff[min(lease.attempt_number - 1, len(backoff) - 1)])
    activities.reopen_execution(lease.execution.id)
    (task,) = tasks.save_tasks(
        [
            workflow_task_row(
                run,
                now=now,
                available_at=now + dt.timedelta(seconds=delay),
                payload={"local_retry_of_step": lease.execution.sequence},
            )
        ]
    )
    dispatch.enqueue(task)
    payload = {
        **base,
        "retry_backoff_seconds": delay,
        "retry_reason": "timeout" if timeout_kind else "failure",
        "exception_type": info.exception_type,
        "message": info.message,
    }
    lifecycle.append(run, [(EventType.ACTIVITY_RETRY_SCHEDULED, payload)], now=now)
