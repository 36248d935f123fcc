"""Operator and client commands on a live run (repair for now)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch, lifecycle
from durable_workflow.executor.closing import Event, close_as
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.headers import check_headers, with_headers
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    CommandStatus,
    CommandType,
    RunStatus,
    TaskStatus,
)
from durable_workflow.store import commands, database, runs, tasks
from durable_workflow.store.records import RunRecord
from durable_workflow.store.workflow_queues import WAITING
from durable_workflow.text import check_reason


@dataclasses.dataclass(frozen=True)
class CommandOutcome:
    accepted: bool
    outcome: str
    command_id: uuid.UUID
    rejection_reason: str | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


def repeated_repair(
    instance_id: str, request_id: str | None, *, namespace: str
) -> CommandOutcome | None:
    """The first repair this instance took under ``request_id`` (call it holding the
    instance lock)."""
    from durable_workflow.executor.intake import repeated_request

    prior = repeated_request(instance_id, CommandType.REPAIR, request_id, namespace=namespace)
    if prior is None:
        return None
    return CommandOutcome(
        prior.command.status == CommandStatus.ACCEPTED,
        prior.command.outcome,
        prior.command.id,
        prior.command.rejection_reason,
        prior.metadata,
    )


@retry_transaction
def request_repair(
    instance_id: str,
    *,
    source: str = "client",
    reason: str = "",
    request_id: str | None = None,
    namespace: str | None = None,
) -> CommandOutcome:
    """Re-create a lost or failed workflow task, reclaim the run's expired leases and
    re-send its ready task messages.

    The accepted command's ``metadata`` says what was done: ``reclaimed_leases`` (tasks
    whose lease had expired, handed out again), ``resent_tasks`` (ready tasks whose
    message went again, those included) and ``recreated_workflow_task``. A
    ``request_id`` the instance already took a repair under returns that first outcome
    and repairs nothing.
    """
    from durable_workflow.executor.intake import check_request_id

    check_reason(reason)
    check_request_id(request_id)
    space = namespaces.resolve(namespace)
    now = clock.now()
    with database.atomic():
        if request_id is not None:  # instance before run, as a start locks them
            runs.lock_instance(instance_id, namespace=space)
        current = runs.current_run(instance_id, namespace=space)
        run = runs.lock_run(current.id) if current else None
        repeated = repeated_repair(instance_id, request_id, namespace=space)
        if repeated is not None:
            return repeated

        def record(
            status: str, outcome: str, rejection: str | None = None, **done: Any
        ) -> CommandOutcome:
            command = commands.record_command(
                namespace=space,
                instance_id=instance_id,
                run_id=run.id if run else None,
                command_type=CommandType.REPAIR,
                status=status,
                outcome=outcome,
                rejection_reason=rejection,
                source=source,
                reason=reason,
                payload={} if request_id is None else {"request_id": request_id},
                metadata=done,
                now=now,
            )
            return CommandOutcome(
                status == CommandStatus.ACCEPTED, outcome, command.id, rejection, done
            )

        if run is None:
            return record(CommandStatus.REJECTED, "rejected_not_started", "instance_not_started")
        if run.status in TERMINAL_RUN_STATUSES:
            return record(CommandStatus.REJECTED, "rejected_not_active", "run_not_active")
        reclaimed = _reclaim_expired(run, now=now)
        open_tasks = tasks.open_tasks_of_run(run.id)
        healthy = (
            not open_tasks
            and run.status == "waiting"
            and tasks.last_workflow_task_status(run.id) == TaskStatus.COMPLETED
        )
        if healthy and not reclaimed:  # waiting on a signal, an update, a child...
            return record(CommandStatus.ACCEPTED, "repair_not_needed")
        recreated = not open_tasks and not healthy
        if recreated:
            wake_workflow(run, now=now)
        ready = [task for task in open_tasks if task.status == TaskStatus.READY]
        for task in ready:
            dispatch.enqueue(task)
        if not (reclaimed or recreated or ready):  # a worker holds every open task now
            return record(CommandStatus.ACCEPTED, "repair_not_needed")
        result = record(
            CommandStatus.ACCEPTED,
            "repair_dispatched",
            reclaimed_leases=reclaimed,
            resent_tasks=len(ready),
            recreated_workflow_task=recreated,
        )
        lifecycle.append(
            run, [(EventType.REPAIR_REQUESTED, {"command_id": str(result.command_id)})], now=now
        )
        runs.save_run(run, now=now)
        return result


def _reclaim_expired(run: RunRecord, *, now: dt.datetime) -> int:
    """Reclaim the run's leases that expired (the caller holds the run lock)."""
    from durable_workflow.executor.repair import reclaim_locked

    expired = [
        task
        for task in tasks.open_tasks_of_run(run.id)
        if task.status == TaskStatus.LEASED
        and task.lease_expires_at is not None
        and task.lease_expires_at < now
    ]
    return sum(reclaim_locked(run, task, now=now) for task in expired)


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
    from durable_workflow.executor.intake import (
        check_request_id,
        recorded,
        repeated_request,
        resolve_target,
    )

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
            return _repeated(prior)
        accepted = rejection is None
        said = recorded(rejection, "cancelled" if kind == "cancel" else "terminated")
        outcome = said.outcome
        command = commands.record_command(
            namespace=space,
            instance_id=instance_id,
            run_id=run.id if run else None,
            command_type=command_type,
            status=CommandStatus.ACCEPTED if accepted else CommandStatus.REJECTED,
            outcome=outcome,
            rejection_reason=said.reason,
            source=source,
            reason=reason or "",
            payload=with_headers({} if request_id is None else {"request_id": request_id}, headers),
            metadata=said.metadata,
            now=now,
        )
        if accepted and run is not None:
            requested = with_headers({"command_id": str(command.id), "reason": reason}, headers)
            if kind == "terminate":
                events: list[Event] = [(EventType.TERMINATE_REQUESTED, requested)]
                events += close_as(
                    run,
                    status=RunStatus.TERMINATED,
                    event_type=EventType.WORKFLOW_TERMINATED,
                    category="terminated",
                    exception_type="WorkflowTerminated",
                    message=reason or "the workflow was terminated",
                    reason=reason,
                    now=now,
                )
                lifecycle.append(run, events, now=now)
            elif run.queue_slot == WAITING:
                # Not started (waiting for a slot on its queue): no body to clean up, so
                # it closes now, and the slot it never held stays with whoever has it.
                events = [(EventType.CANCEL_REQUESTED, requested)]
                events += close_as(
                    run,
                    status=RunStatus.CANCELLED,
                    event_type=EventType.WORKFLOW_CANCELLED,
                    category="cancelled",
                    exception_type="WorkflowCancelled",
                    message=reason or "the workflow was cancelled before it started",
                    reason=reason,
                    now=now,
                )
                lifecycle.append(run, events, now=now)
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


def _repeated(prior: commands.PriorCommand) -> CloseOutcome:
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
