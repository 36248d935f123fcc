"""Closing a run: cancel what is still open, record the failure, write the final event.

Cancel and terminate live here too, with the close policies that apply them to a
closing parent's children: terminating a run closes it, closing it terminates (or
cancels) its children, and so on down the tree, so the recursion stays in this module.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.engine.events import EventType
from durable_workflow.executor import children, lifecycle, session_release, workflow_gate
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.intake import (
    check_request_id,
    record_decision,
    recorded,
    repeated_request,
    resolve_target,
)
from durable_workflow.executor.open_work import abandon_updates, cancel_open_work
from durable_workflow.headers import check_headers, with_headers
from durable_workflow.models import (
    ChildCallStatus,
    CommandStatus,
    CommandType,
    RunStatus,
    WorkflowRun,
)
from durable_workflow.store import activities, commands, database, runs, sql
from durable_workflow.store import children as child_store
from durable_workflow.store.records import RunRecord
from durable_workflow.store.workflow_queues import WAITING
from durable_workflow.text import check_reason

Event = tuple[str, dict[str, Any]]


def finish(run: RunRecord, outcome: dict[str, Any], *, now: dt.datetime) -> list[Event]:
    """Everything a closing run owes: child policies, open work cancelled, parent told,
    worker sessions released (``session_release``).

    Call after ``run.status`` is set to its final value.
    """
    continued = run.status == "completed" and run.closed_reason == "continued"
    # One read says what is open (unless the settle this closing follows asked already);
    # most runs close with nothing left to cancel.
    calls, timers, executions = run.open_work or sql.truths(
        WorkflowRun,
        [child_store.open_calls_clause(run.id), *activities.open_work_clauses(run.id)],
    )
    # Children outlive a continue-as-new: the instance goes on, so no close policy applies.
    events = [] if continued or not calls else apply_close_policies(run, now=now)
    events += cancel_open_work(run, now=now, timers=timers, executions=executions)
    if not continued:
        children.notify_parent(run, outcome, now=now)
        session_release.release_for_closed_run(run, now=now)
        workflow_gate.release(run)  # (a continuing run hands its slot on)
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


def apply_close_policies(run: RunRecord, *, now: dt.datetime) -> list[Event]:
    """The parent is closing: abandon, cancel or terminate each child still open."""
    events: list[Event] = []
    for call in child_store.open_calls(run.id):
        policy = call.parent_close_policy
        outcome = "abandoned"
        if policy == "request_cancel":
            outcome = request_cancel(
                call.child_instance_id,
                reason="parent closed",
                source="parent_close_policy",
                namespace=run.namespace,
            ).outcome
        elif policy == "terminate":
            outcome = request_terminate(
                call.child_instance_id,
                reason="parent closed",
                source="parent_close_policy",
                namespace=run.namespace,
            ).outcome
        else:
            child_store.set_status(call.id, ChildCallStatus.ABANDONED, now=now)
        failed = outcome.startswith("rejected")
        events.append(
            (
                EventType.PARENT_CLOSE_POLICY_FAILED
                if failed
                else EventType.PARENT_CLOSE_POLICY_APPLIED,
                {
                    "sequence": call.sequence,
                    "child_call_id": str(call.id),
                    "child_instance_id": call.child_instance_id,
                    "parent_close_policy": policy,
                    "outcome": outcome,
                },
            )
        )
    return events


@dataclasses.dataclass(frozen=True)
class CloseOutcome:
    accepted: bool
    outcome: str
    command_id: uuid.UUID
    instance_id: str
    run_id: uuid.UUID | None
    rejection_reason: str | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class _AtOnce:
    """How a command closes a run at once: the events, the status and the failure."""

    requested: str
    status: str
    event_type: str
    category: str
    exception_type: str
    message: str  # when the caller gave no reason


_TERMINATED = _AtOnce(
    EventType.TERMINATE_REQUESTED,
    RunStatus.TERMINATED,
    EventType.WORKFLOW_TERMINATED,
    "terminated",
    "WorkflowTerminated",
    "the workflow was terminated",
)
_CANCELLED_UNSTARTED = _AtOnce(
    EventType.CANCEL_REQUESTED,
    RunStatus.CANCELLED,
    EventType.WORKFLOW_CANCELLED,
    "cancelled",
    "WorkflowCancelled",
    "the workflow was cancelled before it started",
)


def _close_now(
    run: RunRecord, how: _AtOnce, requested: dict[str, Any], *, reason: str | None, now: dt.datetime
) -> None:
    events: list[Event] = [(how.requested, requested)]
    events += close_as(
        run,
        status=how.status,
        event_type=how.event_type,
        category=how.category,
        exception_type=how.exception_type,
        message=reason or how.message,
        reason=reason,
        now=now,
    )
    lifecycle.append(run, events, now=now)


def _close_command(
    kind: str,
    instance_id: str,
    *,
    run_id: str | uuid.UUID | None,
    reason: str | None,
    source: str,
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    namespace: str | None = None,
) -> CloseOutcome:
    check_reason(reason)
    check_request_id(request_id)
    headers = check_headers(headers)
    now = clock.now()
    command_type = CommandType.CANCEL if kind == "cancel" else CommandType.TERMINATE
    space = namespaces.resolve(namespace)
    with database.atomic():
        run, rejection = resolve_target(instance_id, run_id, namespace=space)
        prior = repeated_request(instance_id, command_type, request_id, namespace=space)
        if prior is not None:  # the same request again: its first answer, nothing new
            return repeated_close(prior)
        accepted = rejection is None
        said = recorded(rejection, "cancelled" if kind == "cancel" else "terminated")
        outcome = said.outcome
        command = record_decision(
            command_type,
            instance_id,
            run,
            said,
            accepted=accepted,
            source=source,
            reason=reason or "",
            payload=with_headers({} if request_id is None else {"request_id": request_id}, headers),
            namespace=space,
            now=now,
        )
        if accepted and run is not None:
            requested = with_headers({"command_id": str(command.id), "reason": reason}, headers)
            if kind == "terminate":
                _close_now(run, _TERMINATED, requested, reason=reason, now=now)
            elif run.queue_slot == WAITING:
                # Not started (waiting for a slot on its queue): no body to clean up, so
                # it closes now, and the slot it never held stays with whoever has it.
                _close_now(run, _CANCELLED_UNSTARTED, requested, reason=reason, now=now)
            elif run.cancel_requested_at is None:
                lifecycle.append(run, [(EventType.CANCEL_REQUESTED, requested)], now=now)
                run.set(cancel_requested_at=now)
                wake_workflow(run, now=now)
            runs.save_run(run, now=now)
    return CloseOutcome(
        accepted=accepted,
        outcome=outcome,
        command_id=command.id,
        instance_id=instance_id,
        run_id=run.id if run else None,
        rejection_reason=command.rejection_reason,
        metadata=said.metadata,
        reason=reason,
    )


def repeated_close(prior: commands.PriorCommand) -> CloseOutcome:
    return CloseOutcome(
        accepted=prior.command.status == CommandStatus.ACCEPTED,
        outcome=prior.command.outcome,
        command_id=prior.command.id,
        instance_id=prior.command.instance_id,
        run_id=prior.command.run_id,
        rejection_reason=prior.command.rejection_reason,
        metadata=prior.metadata,
        reason=prior.reason or None,
    )


@retry_transaction
def request_cancel(
    instance_id: str,
    *,
    run_id: str | uuid.UUID | None = None,
    reason: str | None = None,
    source: str = "client",
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    namespace: str | None = None,
) -> CloseOutcome:
    """Ask the run to stop: ``WorkflowCancelled`` is raised in the body at its next step.

    The body may clean up (catch it, run compensations) before it finishes; the
    run then closes ``cancelled`` and every still-open timer and activity is
    cancelled with its event.
    """
    return _close_command(
        "cancel",
        instance_id,
        run_id=run_id,
        reason=reason,
        source=source,
        request_id=request_id,
        headers=headers,
        namespace=namespace,
    )


@retry_transaction
def request_terminate(
    instance_id: str,
    *,
    run_id: str | uuid.UUID | None = None,
    reason: str | None = None,
    source: str = "client",
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    namespace: str | None = None,
) -> CloseOutcome:
    """Close the run at once; no more workflow code runs."""
    return _close_command(
        "terminate",
        instance_id,
        run_id=run_id,
        reason=reason,
        source=source,
        request_id=request_id,
        headers=headers,
        namespace=namespace,
    )
