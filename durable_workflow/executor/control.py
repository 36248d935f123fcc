"""Repair, an operator's or client's command on a live run.

Cancel and terminate are in ``closing``: closing a parent applies them to its children.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch, lifecycle
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.intake import check_request_id, repeated_request
from durable_workflow.executor.repair import reclaim_locked
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    CommandStatus,
    CommandType,
    TaskStatus,
)
from durable_workflow.store import commands, database, runs, tasks
from durable_workflow.store.records import RunRecord
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
        repair = _Repair(instance_id, run, source, reason, request_id, space, now)
        if run is None:
            return repair.record(
                CommandStatus.REJECTED, "rejected_not_started", "instance_not_started"
            )
        if run.status in TERMINAL_RUN_STATUSES:
            return repair.record(CommandStatus.REJECTED, "rejected_not_active", "run_not_active")
        return _repair(run, repair)


@dataclasses.dataclass(frozen=True)
class _Repair:
    """One repair request as its command records it: the instance and its run, the
    asker and the reason, the request id, the namespace and the moment."""

    instance_id: str
    run: RunRecord | None
    source: str
    reason: str
    request_id: str | None
    namespace: str
    now: dt.datetime

    def record(
        self, status: str, outcome: str, rejection: str | None = None, **done: Any
    ) -> CommandOutcome:
        """The repair command; ``done`` (what the repair did) is its metadata."""
        command = commands.record_command(
            namespace=self.namespace,
            instance_id=self.instance_id,
            run_id=self.run.id if self.run else None,
            command_type=CommandType.REPAIR,
            status=status,
            outcome=outcome,
            rejection_reason=rejection,
            source=self.source,
            reason=self.reason,
            payload={} if self.request_id is None else {"request_id": self.request_id},
            metadata=done,
            now=self.now,
        )
        return CommandOutcome(
            status == CommandStatus.ACCEPTED, outcome, command.id, rejection, done
        )


def _repair(run: RunRecord, repair: _Repair) -> CommandOutcome:
    """Repair an open run: reclaim expired leases, re-send ready tasks' messages, and
    re-create its workflow task when none is open and it is not healthily waiting."""
    now = repair.now
    reclaimed = _reclaim_expired(run, now=now)
    open_tasks = tasks.open_tasks_of_run(run.id)
    healthy = (
        not open_tasks
        and run.status == "waiting"
        and tasks.last_workflow_task_status(run.id) == TaskStatus.COMPLETED
    )
    if healthy and not reclaimed:  # waiting on a signal, an update, a child...
        return repair.record(CommandStatus.ACCEPTED, "repair_not_needed")
    recreated = not open_tasks and not healthy
    if recreated:
        wake_workflow(run, now=now)
    ready = [task for task in open_tasks if task.status == TaskStatus.READY]
    for task in ready:
        dispatch.enqueue(task)
    if not (reclaimed or recreated or ready):  # a worker holds every open task now
        return repair.record(CommandStatus.ACCEPTED, "repair_not_needed")
    result = repair.record(
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
    expired = [
        task
        for task in tasks.open_tasks_of_run(run.id)
        if task.status == TaskStatus.LEASED
        and task.lease_expires_at is not None
        and task.lease_expires_at < now
    ]
    return sum(reclaim_locked(run, task, now=now) for task in expired)
