"""Turning the runtime's commands into rows, tasks and history events.

Runs inside the workflow-task transaction; returns the events to append, in
the order the body produced them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from durable_workflow.authoring.visibility import encoded_size, merge
from durable_workflow.engine import commands as c
from durable_workflow.engine.durations import whole_or_fraction
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch, lifecycle, streams
from durable_workflow.executor.children import start_child
from durable_workflow.executor.closing import close_as, finish
from durable_workflow.executor.common import check_limit
from durable_workflow.executor.continuation import continue_as_new
from durable_workflow.executor.external import cancel_workflow, signal_workflow
from durable_workflow.executor.open_work import abandon_updates
from durable_workflow.executor.scheduling import ActivityBatch
from durable_workflow.models import (
    ActivityStatus,
    AttemptStatus,
    RunStatus,
    TaskType,
    UpdateStatus,
)
from durable_workflow.store import activities, messages, tasks
from durable_workflow.store import visibility as visibility_store
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def persist(
    run: RunRecord, new: list[c.Command], *, now: dt.datetime, eager_ok: bool = False
) -> list[Event]:
    """Rows and events for the task's new commands; raises ``StructuralLimitExceeded``.

    With ``eager_ok`` one activity this process should run itself is inserted leased
    to it (see :mod:`durable_workflow.executor.eager`) instead of being published.
    """
    events: list[Event] = []
    if any(type(command) in _OPENS_WORK for command in new):
        run.open_work = None  # what the settle saw open may no longer be all
    batch = ActivityBatch(run, now, eager_ok)
    for command in new:
        if type(command) is c.ScheduleActivity:
            events += batch.add(command)
            continue
        batch.flush()  # later commands may refer to the activities just scheduled
        events += _HANDLERS[type(command)](run, command, now)
    batch.flush()
    check_limit("history_transaction_size", len(events), run_id=run.id, count=True)
    return events


def _start_timer(run: RunRecord, command: c.StartTimer, now: dt.datetime) -> list[Event]:
    delay = whole_or_fraction(command.delay_seconds)
    fire_at = now + dt.timedelta(seconds=delay)
    inline = delay == 0
    timer = activities.create_timer(
        run_id=run.id,
        sequence=command.step,
        delay_seconds=delay,
        fire_at=fire_at,
        now=now,
        fired=inline,
        kind=command.kind,
    )
    scheduled: dict[str, Any] = {
        "sequence": command.step,
        "timer_id": str(timer.id),
        "delay_seconds": delay,
        "fire_at": fire_at.isoformat(),
    }
    scheduled.update(command.group or {})
    if command.kind:
        scheduled["timer_kind"] = command.kind
        wait = "signal_wait_id" if command.kind == "signal_timeout" else "condition_wait_id"
        scheduled[wait] = _wait_id(command.kind.split("_")[0], command.step)
    if inline:
        fired = {k: v for k, v in scheduled.items() if k != "fire_at"}
        fired["fired_at"] = now.isoformat()
        return [(EventType.TIMER_SCHEDULED, scheduled), (EventType.TIMER_FIRED, fired)]
    task = tasks.create_task(
        run_id=run.id,
        namespace=run.namespace,
        task_type=TaskType.TIMER,
        available_at=fire_at,
        queue=run.queue,
        connection=run.connection,
        timer_id=timer.id,
        now=now,
        compatibility=run.compatibility,
    )
    dispatch.enqueue(task)
    return [(EventType.TIMER_SCHEDULED, scheduled)]


def _wait_id(kind: str, step: int) -> str:
    return f"{kind}-wait:{step}"


def _side_effect(run: RunRecord, command: c.RecordSideEffect, now: dt.datetime) -> list[Event]:
    return [(EventType.SIDE_EFFECT_RECORDED, {"sequence": command.step, "result": command.result})]


def _failure_handled(
    run: RunRecord, command: c.RecordFailureHandled, now: dt.datetime
) -> list[Event]:
    payload = {
        "sequence": command.step,
        "exception_type": command.exception_type,
        "message": command.message,
    }
    return [(EventType.FAILURE_HANDLED, payload)]


def _open_signal_wait(run: RunRecord, command: c.OpenSignalWait, now: dt.datetime) -> list[Event]:
    payload: dict[str, Any] = {
        "sequence": command.step,
        "signal_name": command.signal_name,
        "signal_wait_id": _wait_id("signal", command.step),
    }
    if command.timeout_seconds is not None:
        payload["timeout_seconds"] = whole_or_fraction(command.timeout_seconds)
    return [(EventType.SIGNAL_WAIT_OPENED, payload)]


def _apply_signal(run: RunRecord, command: c.ApplySignal, now: dt.datetime) -> list[Event]:
    messages.mark_signal_applied(command.signal_id, step=command.step, now=now)
    payload: dict[str, Any] = {
        "sequence": command.step,
        "signal_id": command.signal_id,
        "signal_name": command.signal_name,
    }
    if command.by_handler:
        payload["applied_by"] = "handler"
    else:
        payload["signal_wait_id"] = _wait_id("signal", command.step)
    return [(EventType.SIGNAL_APPLIED, payload)]


def _open_condition_wait(
    run: RunRecord, command: c.OpenConditionWait, now: dt.datetime
) -> list[Event]:
    payload: dict[str, Any] = {
        "sequence": command.step,
        "condition_wait_id": _wait_id("condition", command.step),
        "condition_key": command.condition_key,
        "condition_definition_fingerprint": command.fingerprint,
    }
    if command.timeout_seconds is not None:
        payload["timeout_seconds"] = whole_or_fraction(command.timeout_seconds)
    return [(EventType.CONDITION_WAIT_OPENED, payload)]


def _resolve_condition(
    run: RunRecord, command: c.ResolveConditionWait, now: dt.datetime
) -> list[Event]:
    kind = (
        EventType.CONDITION_WAIT_SATISFIED
        if command.satisfied
        else EventType.CONDITION_WAIT_TIMED_OUT
    )
    return [
        (kind, {"sequence": command.step, "condition_wait_id": _wait_id("condition", command.step)})
    ]


def _cancel_timer(run: RunRecord, command: c.CancelTimer, now: dt.datetime) -> list[Event]:
    timer_id = messages.cancel_timer_of_step(run.id, command.step)
    return [
        (
            EventType.TIMER_CANCELLED,
            {"sequence": command.step, "timer_id": str(timer_id) if timer_id else None},
        )
    ]


def _apply_update(run: RunRecord, command: c.ApplyUpdate, now: dt.datetime) -> list[Event]:
    messages.mark_update_applied(command.update_id, step=command.step)
    payload = {
        "update_id": command.update_id,
        "update_name": command.update_name,
        "sequence": command.step,
    }
    return [(EventType.UPDATE_APPLIED, payload)]


def _complete_update(run: RunRecord, command: c.CompleteUpdate, now: dt.datetime) -> list[Event]:
    payload: dict[str, Any] = {"update_id": command.update_id, "update_name": command.update_name}
    if command.failure is None:
        messages.close_update(
            command.update_id, status=UpdateStatus.COMPLETED, now=now, result=command.result
        )
        payload["result"] = command.result
    else:
        info = command.failure
        failure_id = lifecycle.record_failure_of(
            info,
            run,
            source_kind="workflow_update",
            source_id=command.update_id,
            category="application",
            details={},
            now=now,
        )
        messages.close_update(
            command.update_id, status=UpdateStatus.FAILED, now=now, failure_message=info.message
        )
        payload.update(
            failure_id=str(failure_id),
            exception_type=info.exception_type,
            message=info.message,
            non_retryable=info.non_retryable,
        )
    return [(EventType.UPDATE_COMPLETED, payload)]


def _start_child(run: RunRecord, command: c.StartChild, now: dt.datetime) -> list[Event]:
    return start_child(run, command, now=now)


def _signal_workflow(run: RunRecord, command: c.SignalExternal, now: dt.datetime) -> list[Event]:
    return signal_workflow(run, command, now=now)


def _cancel_workflow(run: RunRecord, command: c.CancelExternal, now: dt.datetime) -> list[Event]:
    return cancel_workflow(run, command, now=now)


def _cancel_activity(run: RunRecord, command: c.CancelActivity, now: dt.datetime) -> list[Event]:
    """A select() loser cancelled by the body: the execution and its task stop."""
    execution = activities.execution_at_step(run.id, command.step)
    if execution is None:
        return []
    activities.close_execution(execution.id, ActivityStatus.CANCELLED, now=now)
    if execution.current_attempt_id is not None:
        activities.close_attempt(
            execution.current_attempt_id, AttemptStatus.CANCELLED, now=now, only_running=True
        )
    tasks.cancel_tasks_of_execution(execution.id, now=now)
    payload = {
        "sequence": command.step,
        "activity_execution_id": str(execution.id),
        "activity_type": execution.activity_type,
        **command.selection,
    }
    return [(EventType.ACTIVITY_CANCELLED, payload)]


def _record_selection(run: RunRecord, command: c.RecordSelection, now: dt.datetime) -> list[Event]:
    return [(command.event_type, dict(command.payload))]


def _version_marker(
    run: RunRecord, command: c.RecordVersionMarker, now: dt.datetime
) -> list[Event]:
    return [(EventType.VERSION_MARKER_RECORDED, dataclasses.asdict(command))]


def _upsert_visibility(
    run: RunRecord, command: c.UpsertVisibility, now: dt.datetime
) -> list[Event]:
    """Merge the entries into the run (None deletes) and check the size limit."""
    memo, attributes = visibility_store.current_visibility(run.id)
    if command.kind == "memo":
        merged = merge(memo, command.entries)
        check_limit("memo_size_bytes", encoded_size(merged))
        visibility_store.update_run_visibility(run.id, memo=merged)
        payload = {"sequence": command.step, "entries": command.entries, "merged": merged}
        return [(EventType.MEMO_UPSERTED, payload)]
    merged = merge(attributes, command.entries)
    check_limit("search_attribute_size_bytes", encoded_size(merged))
    visibility_store.update_run_visibility(run.id, search_attributes=merged)
    visibility_store.replace_attributes(run.id, merged)
    payload = {"sequence": command.step, "attributes": command.entries, "merged": merged}
    return [(EventType.SEARCH_ATTRIBUTES_UPSERTED, payload)]


def _advance_cursor(run: RunRecord, command: c.AdvanceCursor, now: dt.datetime) -> list[Event]:
    return streams.advance_cursor(run, command, now=now)


def _send_message(run: RunRecord, command: c.SendMessage, now: dt.datetime) -> list[Event]:
    return streams.send_from_workflow(run, command, now=now)


_HANDLERS: dict[type, Any] = {
    c.AdvanceCursor: _advance_cursor,
    c.SendMessage: _send_message,
    c.RecordVersionMarker: _version_marker,
    c.UpsertVisibility: _upsert_visibility,
    c.StartChild: _start_child,
    c.SignalExternal: _signal_workflow,
    c.CancelExternal: _cancel_workflow,
    c.CancelActivity: _cancel_activity,
    c.RecordSelection: _record_selection,
    c.StartTimer: _start_timer,
    c.RecordSideEffect: _side_effect,
    c.RecordFailureHandled: _failure_handled,
    c.OpenSignalWait: _open_signal_wait,
    c.ApplySignal: _apply_signal,
    c.OpenConditionWait: _open_condition_wait,
    c.ResolveConditionWait: _resolve_condition,
    c.CancelTimer: _cancel_timer,
    c.ApplyUpdate: _apply_update,
    c.CompleteUpdate: _complete_update,
}


#: Commands after which a closing must look again at what is open.
_OPENS_WORK = frozenset({c.ScheduleActivity, c.StartTimer, c.StartChild})


def close(
    run: RunRecord,
    closed: c.CloseCommand,
    *,
    now: dt.datetime,
    unfinished: list[tuple[str, str, bool]] | None = None,
) -> list[Event]:
    """Close the run as completed, failed, cancelled or continued-as-new.

    ``unfinished``: the updates the body leaves open (id, name, handler started), which
    fail; on continue-as-new those not started yet move to the next run instead.
    """
    events = _close(run, closed, now=now)
    continued = isinstance(closed, c.ContinueAsNew)
    open_updates = [(i, n) for i, n, started in unfinished or [] if started or not continued]
    # (A cancelled run's closing fails every open update itself.)
    if open_updates and not isinstance(closed, c.CancelWorkflow):
        events[-1:-1] = abandon_updates(run, open_updates, now=now)
    return events


def _close(run: RunRecord, closed: c.CloseCommand, *, now: dt.datetime) -> list[Event]:
    if isinstance(closed, c.CancelWorkflow):
        return close_as(
            run,
            status=RunStatus.CANCELLED,
            event_type=EventType.WORKFLOW_CANCELLED,
            category="cancelled",
            exception_type="WorkflowCancelled",
            message=closed.reason or "the workflow was cancelled",
            reason=closed.reason,
            now=now,
        )
    if isinstance(closed, c.ContinueAsNew):
        return continue_as_new(
            run, closed.arguments, closed.message_cursors, headers=closed.headers, now=now
        )
    if isinstance(closed, c.CompleteWorkflow):
        run.set(
            status=RunStatus.COMPLETED,
            closed_reason="completed",
            output=closed.result,
            closed_at=now,
        )
        events = finish(run, {"result": closed.result}, now=now)
        return [*events, (EventType.WORKFLOW_COMPLETED, {"result": closed.result})]
    info = closed.failure
    failure_id = lifecycle.record_failure_of(
        info, run, source_kind="workflow_run", source_id=str(run.id), now=now
    )
    run.set(status=RunStatus.FAILED, closed_reason="failed", closed_at=now)
    final = {
        "failure_id": str(failure_id),
        "failure_category": info.category,
        "exception_type": info.exception_type,
        "exception_class": info.exception_class,
        "message": info.message,
        "non_retryable": info.non_retryable,
        **info.details,
    }
    events = finish(run, final, now=now)
    return [*events, (EventType.WORKFLOW_FAILED, final)]
