"""Operator and client commands on a live run (repair for now)."""

from __future__ import annotations

import dataclasses
import uuid

from django.db import transaction

from durable_workflow import clock
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_when_locked, wake_workflow
from durable_workflow.models import TERMINAL_RUN_STATUSES, CommandStatus, CommandType, TaskStatus
from durable_workflow.store import commands, history, runs, tasks


@dataclasses.dataclass(frozen=True)
class CommandOutcome:
    accepted: bool
    outcome: str
    command_id: uuid.UUID
    rejection_reason: str | None = None


@retry_when_locked
def request_repair(instance_id: str, *, source: str = "client", reason: str = "") -> CommandOutcome:
    """Re-create a lost or failed workflow task, or re-send ready task messages."""
    now = clock.now()
    with transaction.atomic():
        current = runs.current_run(instance_id)
        run = runs.lock_run(current.id) if current else None

        def record(status: str, outcome: str, rejection: str | None = None) -> CommandOutcome:
            command = commands.record_command(
                instance_id=instance_id,
                run_id=run.id if run else None,
                command_type=CommandType.REPAIR,
                status=status,
                outcome=outcome,
                rejection_reason=rejection,
                source=source,
                reason=reason,
                now=now,
            )
            return CommandOutcome(status == CommandStatus.ACCEPTED, outcome, command.id, rejection)

        if run is None:
            return record(CommandStatus.REJECTED, "rejected_not_started", "instance_not_started")
        if run.status in TERMINAL_RUN_STATUSES:
            return record(CommandStatus.REJECTED, "rejected_not_active", "run_not_active")
        open_tasks = tasks.open_tasks_of_run(run.id)
        if not open_tasks:
            wake_workflow(run, now=now)
        for task in open_tasks:
            if task.status == TaskStatus.READY:
                dispatch.enqueue(task)
        if open_tasks and all(t.status != TaskStatus.READY for t in open_tasks):
            return record(CommandStatus.ACCEPTED, "repair_not_needed")
        result = record(CommandStatus.ACCEPTED, "repair_dispatched")
        history.append_events(
            run, [(EventType.REPAIR_REQUESTED, {"command_id": str(result.command_id)})], now=now
        )
        runs.save_run(run, now=now)
        return result
