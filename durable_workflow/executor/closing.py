"""Closing a run: cancel what is still open, record the failure, write the final event."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.engine.events import EventType
from durable_workflow.models import ActivityStatus, AttemptStatus, TaskStatus
from durable_workflow.store import activities, commands, messages, tasks
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def cancel_open_work(run: RunRecord, *, now: dt.datetime) -> list[Event]:
    """TimerCancelled for each pending timer, ActivityCancelled for each open activity."""
    events: list[Event] = []
    for timer in activities.pending_timers_of_run(run.id):
        messages.cancel_timer_of_step(run.id, timer.sequence)
        events.append(
            (EventType.TIMER_CANCELLED, {"sequence": timer.sequence, "timer_id": str(timer.id)})
        )
    for execution in activities.open_executions_of_run(run.id):
        activities.close_execution(execution.id, ActivityStatus.CANCELLED, now=now)
        if execution.current_attempt_id is not None:
            activities.close_attempt(
                execution.current_attempt_id, AttemptStatus.CANCELLED, now=now, only_running=True
            )
        events.append(
            (
                EventType.ACTIVITY_CANCELLED,
                {
                    "sequence": execution.sequence,
                    "activity_execution_id": str(execution.id),
                    "activity_type": execution.activity_type,
                },
            )
        )
    tasks.settle_open_tasks_of_run(run.id, TaskStatus.CANCELLED, now=now)
    return events


def close_as(
    run: RunRecord,
    *,
    status: str,
    event_type: str,
    category: str,
    exception_type: str,
    message: str,
    reason: str | None,
    now: dt.datetime,
) -> list[Event]:
    """Close the run as cancelled or terminated (open work first, then the final event)."""
    events = cancel_open_work(run, now=now)
    failure_id = commands.record_failure(
        run_id=run.id,
        source_kind="workflow_run",
        source_id=str(run.id),
        failure_category=category,
        exception_type=exception_type,
        exception_class=f"durable_workflow.exceptions.{exception_type}",
        message=message,
        traceback="",
        non_retryable=True,
        details={"propagation_kind": category, "reason": reason},
        now=now,
    )
    run.set(status=status, closed_reason=status, closed_at=now)
    events.append(
        (
            event_type,
            {"failure_id": str(failure_id), "failure_category": category, "reason": reason},
        )
    )
    return events
