"""The describe projection: instance, selected run, and what can be done to it now.

Read-only and without replay: everything comes from committed rows.
"""

from __future__ import annotations

from typing import Any

from durable_workflow import registry
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import UnknownTypeError
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityExecution,
    ActivityStatus,
    ChildCall,
    ChildCallStatus,
    HistoryEvent,
    Timer,
    TimerStatus,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.webhooks.records import parse_uuid
from durable_workflow.webhooks.responses import iso

NO_ACTIONS = {
    "can_signal": False,
    "can_query": False,
    "can_update": False,
    "can_cancel": False,
    "can_terminate": False,
    "can_archive": False,
}

_BUCKET = {"completed": "completed", "failed": "failed", "cancelled": "failed"}

_RESOLVES = (
    EventType.SIGNAL_APPLIED,
    EventType.CONDITION_WAIT_SATISFIED,
    EventType.CONDITION_WAIT_TIMED_OUT,
    EventType.TIMER_FIRED,
)


def status_bucket(status: str) -> str:
    if status == "terminated":
        return "failed"
    return _BUCKET.get(status, "running")


def not_found(instance_id: str) -> dict[str, Any]:
    return {
        "found": False,
        "workflow_instance_id": instance_id,
        "workflow_type": None,
        "workflow_class": None,
        "business_key": None,
        "run": None,
        "run_count": 0,
        "actions": dict(NO_ACTIONS),
        "reason": "instance_not_found",
    }


def describe(instance: WorkflowInstance, run_id: str | None) -> dict[str, Any]:
    newest = WorkflowRun.objects.filter(
        namespace=instance.namespace, instance_id=instance.instance_id
    ).order_by("-run_number")
    current = newest.first()
    if run_id is None:
        run = current
    else:
        parsed = parse_uuid(run_id)
        run = newest.filter(id=parsed).first() if parsed else None
    shown = run or current
    document: dict[str, Any] = {
        "found": True,
        "workflow_instance_id": instance.instance_id,
        "workflow_type": instance.workflow_type,
        "workflow_class": (shown.workflow_class or None) if shown else None,
        "business_key": instance.business_key,
        "run": None,
        "run_count": instance.run_count,
        "actions": dict(NO_ACTIONS),
        "reason": None,
        "memo": (run.memo if run else None) or {},
        "execution_timeout_seconds": run.execution_timeout_seconds if run else None,
    }
    if run is None:
        if run_id is not None:
            document["reason"] = "run_not_found"
        return document
    is_current = current is not None and current.id == run.id
    document["run"] = _run(run, is_current)
    document["actions"] = _actions(run, is_current)
    return document


def _run(run: WorkflowRun, is_current: bool) -> dict[str, Any]:
    wait_kind, wait_reason = _wait(run)
    return {
        "workflow_run_id": str(run.id),
        "run_number": run.run_number,
        "is_current_run": is_current,
        "status": run.status,
        "status_bucket": status_bucket(run.status),
        "closed_reason": run.closed_reason,
        "compatibility": run.compatibility,
        "connection": run.connection,
        "queue": run.queue,
        "started_at": iso(run.started_at),
        "closed_at": iso(run.closed_at),
        "archived_at": iso(run.archived_at),
        "last_progress_at": iso(run.last_progress_at),
        "wait_kind": wait_kind,
        "wait_reason": wait_reason,
        "run_timeout_seconds": run.run_timeout_seconds,
        "execution_deadline_at": iso(run.execution_deadline_at),
        "run_deadline_at": iso(run.run_deadline_at),
    }


def _actions(run: WorkflowRun, is_current: bool) -> dict[str, bool]:
    if run.status in TERMINAL_RUN_STATUSES:  # any closed run may be archived, once
        return {**NO_ACTIONS, "can_archive": run.archived_at is None}
    if not is_current:
        return dict(NO_ACTIONS)
    try:
        registry.workflow_class(run.workflow_type)
        local = True
    except UnknownTypeError:
        local = False  # only a remote worker fleet can run it: no local queries or updates
    return {
        "can_signal": True,
        "can_query": local,
        "can_update": local,
        "can_cancel": True,
        "can_terminate": True,
        "can_archive": False,
    }


def _open_wait(run: WorkflowRun) -> tuple[str, str] | None:
    """The newest signal or condition wait that nothing has resolved yet."""
    opened = (
        HistoryEvent.objects.filter(
            run_id=run.id,
            event_type__in=(EventType.SIGNAL_WAIT_OPENED, EventType.CONDITION_WAIT_OPENED),
        )
        .order_by("-sequence")
        .values_list("event_type", "payload")
    )
    resolved = {
        payload.get("sequence")
        for payload in HistoryEvent.objects.filter(
            run_id=run.id, event_type__in=_RESOLVES
        ).values_list("payload", flat=True)
        if isinstance(payload, dict)
    }
    for event_type, payload in opened:
        if payload.get("sequence") in resolved:
            continue
        if event_type == EventType.SIGNAL_WAIT_OPENED:
            return "signal", f"Waiting for signal [{payload.get('signal_name')}]"
        key = payload.get("condition_key")
        return "condition", f"Waiting for condition [{key}]" if key else "Waiting for condition"
    return None


def _wait(run: WorkflowRun) -> tuple[str | None, str | None]:
    if run.status in TERMINAL_RUN_STATUSES:
        return None, None
    waiting = _open_wait(run)
    if waiting is not None:
        return waiting
    activity = (
        ActivityExecution.objects.filter(
            run_id=run.id, status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
        )
        .order_by("sequence")
        .values_list("activity_type", flat=True)
        .first()
    )
    if activity:
        return "activity", f"Waiting for activity [{activity}]"
    child = (
        ChildCall.objects.filter(
            parent_run_id=run.id, status__in=(ChildCallStatus.SCHEDULED, ChildCallStatus.STARTED)
        )
        .values_list("child_workflow_type", flat=True)
        .first()
    )
    if child:
        return "child", f"Waiting for child workflow [{child}]"
    if Timer.objects.filter(run_id=run.id, status=TimerStatus.PENDING).exists():
        return "timer", "Waiting for timer"
    return None, None
