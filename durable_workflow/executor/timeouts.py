"""Timeouts: workflow execution/run deadlines and the four activity timeouts.

Workflow deadlines are checked at the start of every workflow task; the repair
pass (the watchdog) also finds expired runs and expired activity deadlines
that no task would otherwise notice. Every enforcement re-checks under the
run lock, so running the watchdog twice never records a timeout twice.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch, lifecycle
from durable_workflow.executor.activity_failures import record_final_failure
from durable_workflow.executor.closing import finish
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.open_work import abandon_updates
from durable_workflow.logs import get_logger
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityStatus,
    AttemptStatus,
    RunStatus,
    TaskType,
)
from durable_workflow.store import activities, database, runs, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord

logger = get_logger("durable_workflow")

Event = tuple[str, dict[str, Any]]


# ----------------------------------------------------------------- workflow
def expired_deadline(run: RunRecord, now: dt.datetime) -> tuple[str, dt.datetime] | None:
    for kind, deadline in (
        ("execution_timeout", run.execution_deadline_at),
        ("run_timeout", run.run_deadline_at),
    ):
        if deadline is not None and deadline <= now:
            return kind, deadline
    return None


def time_out_run(run: RunRecord, kind: str, deadline: dt.datetime, *, now: dt.datetime) -> None:
    """Close the run failed/timed_out; the caller holds the run lock."""
    message = f"the workflow {kind.replace('_', ' ')} passed at {deadline.isoformat()}"
    failure_id = lifecycle.record_failure(
        run,
        source_kind="workflow_run",
        source_id=str(run.id),
        failure_category="timeout",
        exception_type="WorkflowTimeout",
        exception_class="durable_workflow.exceptions.WorkflowTimeout",
        message=message,
        traceback="",
        non_retryable=True,
        details={
            "timeout_kind": kind,
            "deadline": deadline.isoformat(),
            "propagation_kind": "timeout",
        },
        now=now,
    )
    run.set(status=RunStatus.FAILED, closed_reason="timed_out", closed_at=now)
    final = {
        "failure_id": str(failure_id),
        "failure_category": "timeout",
        "timeout_kind": kind,
        "deadline": deadline.isoformat(),
        "exception_type": "WorkflowTimeout",
        "message": message,
    }
    events = finish(run, final, now=now) + abandon_updates(run, None, now=now)
    lifecycle.append(run, [*events, (EventType.WORKFLOW_TIMED_OUT, final)], now=now)
    runs.save_run(run, now=now)


@retry_transaction
def enforce_run_deadline(run_id: uuid.UUID, *, now: dt.datetime) -> bool:
    with database.atomic():
        run = runs.lock_run(run_id)
        if run is None or run.status in TERMINAL_RUN_STATUSES:
            return False
        expired = expired_deadline(run, now)
        if expired is None:
            return False
        time_out_run(run, *expired, now=now)
        return True


# ----------------------------------------------------------------- activity
def schedule_deadlines(options: dict[str, Any], now: dt.datetime) -> dict[str, dt.datetime | None]:
    """Deadlines fixed when an activity is scheduled (or re-queued for a retry)."""

    def after(key: str) -> dt.datetime | None:
        seconds = options.get(key)
        return now + dt.timedelta(seconds=int(seconds)) if seconds else None

    return {
        "schedule_to_close_deadline_at": after("schedule_to_close_timeout"),
        "schedule_to_start_deadline_at": after("schedule_to_start_timeout"),
    }


def attempt_deadlines(options: dict[str, Any], now: dt.datetime) -> dict[str, dt.datetime | None]:
    """Deadlines that start when an attempt is claimed."""

    def after(key: str) -> dt.datetime | None:
        seconds = options.get(key)
        return now + dt.timedelta(seconds=int(seconds)) if seconds else None

    return {
        "start_to_close_deadline_at": after("start_to_close_timeout"),
        "heartbeat_deadline_at": after("heartbeat_timeout"),
    }


@retry_transaction
def enforce_activity_timeout(execution_id: uuid.UUID, kind: str, *, now: dt.datetime) -> bool:
    """Time out one activity execution if ``kind`` has really expired (re-checked here)."""
    with database.atomic():
        execution = activities.get_execution(execution_id)
        if execution is None:
            return False
        run = runs.lock_run(execution.run_id)
        execution = activities.get_execution(execution_id)
        if run is None or execution is None or run.status in TERMINAL_RUN_STATUSES:
            return False
        if not activities.timeout_still_due(execution.id, kind, now=now):
            return False
        attempt_id = execution.current_attempt_id
        if attempt_id is not None and execution.status == ActivityStatus.RUNNING:
            activities.close_attempt(attempt_id, AttemptStatus.FAILED, now=now, only_running=True)
        tasks.cancel_tasks_of_execution(execution.id, now=now)
        info = FailureInfo(
            exception_type="ActivityTimedOut",
            exception_class="durable_workflow.exceptions.ActivityTimeoutError",
            message=f"activity {execution.activity_type} timed out ({kind})",
            category="timeout",
        )
        if kind == "schedule_to_start":
            # The attempt never started, but the window it had counts as one try.
            activities.bump_attempt_count(execution.id)
            execution = dataclasses.replace(execution, attempt_count=execution.attempt_count + 1)
        max_attempts = int(execution.options.get("max_attempts", 1))
        retry = kind != "schedule_to_close" and (
            max_attempts == 0 or execution.attempt_count < max_attempts
        )
        base = {
            "sequence": execution.sequence,
            "activity_execution_id": str(execution.id),
            "activity_type": execution.activity_type,
            "attempt_number": execution.attempt_count,
            "timeout_kind": kind,
        }
        if retry:
            events = [_retry(run, execution, base, info, now=now)]
        else:
            _, payload = record_final_failure(
                run,
                execution,
                attempt_id=attempt_id,
                attempt_number=execution.attempt_count,
                info=info,
                non_retryable=True,
                now=now,
            )
            events = [(EventType.ACTIVITY_TIMED_OUT, {**payload, "timeout_kind": kind})]
        lifecycle.append(run, events, now=now)
        runs.save_run(run, now=now)
        return True


def _retry(
    run: RunRecord,
    execution: ActivityRecord,
    base: dict[str, Any],
    info: FailureInfo,
    *,
    now: dt.datetime,
) -> Event:
    backoff = execution.options.get("backoff") or [1]
    delay = int(backoff[min(max(execution.attempt_count, 1) - 1, len(backoff) - 1)])
    available = now + dt.timedelta(seconds=delay)
    activities.reopen_execution(execution.id)
    # A fresh schedule-to-start window for the retry (never an instant re-timeout).
    activities.set_deadlines(
        execution.id,
        schedule_to_start_deadline_at=schedule_deadlines(execution.options, available)[
            "schedule_to_start_deadline_at"
        ],
    )
    task = tasks.create_task(
        run_id=run.id,
        namespace=run.namespace,
        task_type=TaskType.ACTIVITY,
        available_at=available,
        queue=execution.queue,
        connection=execution.connection,
        activity_execution_id=execution.id,
        payload={"retry_after_attempt": execution.attempt_count, "retry_backoff_seconds": delay},
        now=now,
        compatibility=run.compatibility,
        priority=execution.options.get("priority"),
    )
    dispatch.enqueue(task)
    return (
        EventType.ACTIVITY_RETRY_SCHEDULED,
        {
            **base,
            "retry_task_id": str(task.id),
            "retry_backoff_seconds": delay,
            "message": info.message,
        },
    )


def enforce_due_timeouts(*, now: dt.datetime, limit: int) -> int:
    """The watchdog: every expired run deadline and activity timeout, once."""
    enforced = 0
    for run_id in runs.runs_past_deadline(now=now, limit=limit):
        enforced += enforce_run_deadline(run_id, now=now)
    for execution_id, kind in activities.timeouts_due(now=now, limit=limit):
        enforced += enforce_activity_timeout(execution_id, kind, now=now)
    return enforced
