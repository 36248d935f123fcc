"""Closing a run: cancel what is still open, record the failure, write the final event."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.engine.events import EventType
from durable_workflow.executor import lifecycle
from durable_workflow.headers import with_headers
from durable_workflow.models import ActivityStatus, AttemptStatus, TaskStatus, WorkflowRun
from durable_workflow.store import activities, messages, runs, sql, tasks
from durable_workflow.store import children as child_store
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def finish(run: RunRecord, outcome: dict[str, Any], *, now: dt.datetime) -> list[Event]:
    """Everything a closing run owes: child policies, open work cancelled, parent told,
    worker sessions released (``session_release``).

    Call after ``run.status`` is set to its final value.
    """
    from durable_workflow.executor import children, session_release, workflow_gate

    continued = run.status == "completed" and run.closed_reason == "continued"
    # One read says what is open (unless the settle this closing follows asked already);
    # most runs close with nothing left to cancel.
    calls, timers, executions = run.open_work or sql.truths(
        WorkflowRun,
        [child_store.open_calls_clause(run.id), *activities.open_work_clauses(run.id)],
    )
    # Children outlive a continue-as-new: the instance goes on, so no close policy applies.
    events = [] if continued or not calls else children.apply_close_policies(run, now=now)
    events += cancel_open_work(run, now=now, timers=timers, executions=executions)
    if not continued:
        children.notify_parent(run, outcome, now=now)
        session_release.release_for_closed_run(run, now=now)
        workflow_gate.release(run)  # (a continuing run hands its slot on)
    return events


#: Why an update left open by a closing run failed.
UPDATE_ABANDONED = "UpdateAbandoned"


def abandon_updates(
    run: RunRecord, updates: list[tuple[str, str]] | None, *, now: dt.datetime
) -> list[Event]:
    """Fail the updates a closing run leaves open (``None``: every open one), so callers
    waiting on them get an answer: ``UpdateCompleted`` with the failure."""
    from durable_workflow.engine.commands import FailureInfo
    from durable_workflow.models import UpdateStatus

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
    failure_id = lifecycle.record_failure(
        run,
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
    final = {"failure_id": str(failure_id), "failure_category": category, "reason": reason}
    events = finish(run, {"reason": reason, "message": message, **final}, now=now)
    events += abandon_updates(run, None, now=now)
    events.append((event_type, final))
    return events


def continue_as_new(
    run: RunRecord,
    arguments: dict[str, Any],
    cursors: dict[str, int] | None = None,
    *,
    headers: dict[str, str] | None = None,
    now: dt.datetime,
) -> list[Event]:
    """Close this run ``completed``/``continued`` and start the next run of the instance.

    The new run inherits visibility (business key, labels, memo, search
    attributes), the start headers, the execution deadline (the run deadline starts afresh), the
    parent link, and every signal, update and message that was received but not
    yet consumed, in the order this run received them.
    """
    from durable_workflow.executor import children
    from durable_workflow.executor.common import wake_workflow

    carried = runs.continuation_fields(run.id)
    if carried.get("run_timeout_seconds"):
        carried["run_deadline_at"] = now + dt.timedelta(seconds=carried["run_timeout_seconds"])
    following = runs.create_run(
        namespace=run.namespace,
        instance_id=run.instance_id,
        workflow_type=run.workflow_type,
        workflow_class=run.workflow_class,
        arguments=arguments,
        payload_codec=run.payload_codec,
        queue=run.queue,
        connection=run.connection,
        now=now,
        extra={
            **carried,
            "parent_run_id": run.parent_run_id,
            "parent_sequence": run.parent_sequence,
            "parent_close_policy": run.parent_close_policy,
            "continued_from_id": run.id,
        },
    )
    run.set(status="completed", closed_reason="continued", closed_at=now)
    events = finish(run, {}, now=now)
    from durable_workflow.executor.start import _fingerprint, started_context

    fingerprint = _fingerprint(run.workflow_type)
    following.set(workflow_definition_fingerprint=fingerprint)
    if carried.get("search_attributes"):
        from durable_workflow.store import visibility as visibility_store

        visibility_store.replace_attributes(following.id, carried["search_attributes"])
    started = {
        "workflow_definition_fingerprint": fingerprint,
        "workflow_type": run.workflow_type,
        "workflow_class": run.workflow_class,
        "workflow_instance_id": run.instance_id,
        "workflow_run_id": str(following.id),
        "run_number": following.run_number,
        "arguments": arguments,
        "payload_codec": run.payload_codec,
        "continued_from_run_id": str(run.id),
        "message_cursors": cursors or {},
        **started_context(
            queue=run.queue,
            memo=carried.get("memo") or {},
            search_attributes=carried.get("search_attributes") or {},
            parent_run_id=run.parent_run_id,
            parent_instance_id=_instance_of(run.parent_run_id),
        ),
    }
    lifecycle.append(
        following,
        [
            (EventType.WORKFLOW_STARTED, with_headers(started, headers)),
            *messages.carry_pending_inputs(run.id, following.id),
        ],
        now=now,
    )
    wake_workflow(following, now=now)
    following.set(status="pending")
    runs.save_run(following, now=now)
    if run.parent_run_id is not None and run.parent_sequence is not None:
        from durable_workflow.store import children as child_store

        child_store.follow_run(run.parent_run_id, run.parent_sequence, following.id)
        children.wake_parent(run.parent_run_id, now=now)
    events.append(
        (
            EventType.WORKFLOW_CONTINUED_AS_NEW,
            {"new_run_id": str(following.id), "new_run_number": following.run_number},
        )
    )
    return events


def _instance_of(run_id: Any) -> str | None:
    if run_id is None:
        return None
    found = runs.get_run(run_id)
    return found.instance_id if found is not None else None
