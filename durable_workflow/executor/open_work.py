"""What a closing run leaves open: timers and activities cancelled with their events,
its tasks settled, and its open updates failed so that callers waiting on them get an
answer."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import EventType
from durable_workflow.executor import lifecycle
from durable_workflow.models import ActivityStatus, AttemptStatus, TaskStatus, UpdateStatus
from durable_workflow.store import activities, messages, tasks
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


#: Why an update left open by a closing run failed.
UPDATE_ABANDONED = "UpdateAbandoned"


def abandon_updates(
    run: RunRecord, updates: list[tuple[str, str]] | None, *, now: dt.datetime
) -> list[Event]:
    """Fail the updates a closing run leaves open (``None``: every open one), so callers
    waiting on them get an answer: ``UpdateCompleted`` with the failure."""
    events: list[Event] = []
    for update_id, name in messages.open_updates(run.id) if updates is None else updates:
        reason = "continued as new" if run.closed_reason == "continued" else run.status
        info = FailureInfo(
            exception_type=UPDATE_ABANDONED,
            exception_class="",
            message=f"the workflow run closed ({reason}) before the update finished",
            non_retryable=True,
        )
        failure_id = lifecycle.record_failure_of(
            info,
            run,
            source_kind="workflow_update",
            source_id=update_id,
            category="application",
            details={},
            now=now,
        )
        messages.close_update(
            update_id, status=UpdateStatus.FAILED, now=now, failure_message=info.message
        )
        payload = {
            "update_id": update_id,
            "update_name": name,
            "failure_id": str(failure_id),
            "exception_type": info.exception_type,
            "message": info.message,
            "non_retryable": True,
        }
        events.append((EventType.UPDATE_COMPLETED, payload))
    return events


def cancel_open_work(
    run: RunRecord, *, now: dt.datetime, timers: bool = True, executions: bool = True
) -> list[Event]:
    """TimerCancelled for each pending timer, ActivityCancelled for each open activity.

    ``timers``/``executions`` ``False``: the caller knows there are none of those.
    """
    events: list[Event] = []
    for timer in activities.pending_timers_of_run(run.id) if timers else []:
        messages.cancel_timer_of_step(run.id, timer.sequence)
        events.append(
            (EventType.TIMER_CANCELLED, {"sequence": timer.sequence, "timer_id": str(timer.id)})
        )
    for execution in activities.open_executions_of_run(run.id) if executions else []:
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
