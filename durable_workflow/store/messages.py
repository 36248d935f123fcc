"""Signal and update lifecycle rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from django.db.models import QuerySet

from durable_workflow.ids import uuid7
from durable_workflow.models import (
    HistoryEvent,
    SignalStatus,
    Task,
    TaskStatus,
    Timer,
    TimerStatus,
    UpdateStatus,
    WorkflowCommand,
    WorkflowMessage,
    WorkflowSignal,
    WorkflowUpdate,
)
from durable_workflow.store import records

Event = tuple[str, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class UpdateRecord:
    id: uuid.UUID
    instance_id: str
    run_id: uuid.UUID | None
    update_name: str
    status: str
    rejection_reason: str | None
    result: dict[str, Any] | None
    failure_message: str
    accepted_at: dt.datetime
    closed_at: dt.datetime | None
    command_id: uuid.UUID


_update_record = records.reader(UpdateRecord)


def create_signal(
    *,
    instance_id: str,
    run_id: uuid.UUID | None,
    command_id: uuid.UUID,
    name: str,
    arguments: dict[str, Any],
    status: str,
    now: dt.datetime,
    rejection_reason: str | None = None,
    received_sequence: int | None = None,
) -> uuid.UUID:
    row = WorkflowSignal.objects.create(
        id=uuid7(),
        instance_id=instance_id,
        run_id=run_id,
        command_id=command_id,
        signal_name=name,
        arguments=arguments,
        status=status,
        rejection_reason=rejection_reason,
        received_sequence=received_sequence,
        received_at=now,
    )
    return row.id


def pending_signal_count(run_id: uuid.UUID) -> int:
    return WorkflowSignal.objects.filter(run_id=run_id, status=SignalStatus.RECEIVED).count()


def mark_signal_applied(signal_id: str, *, step: int, now: dt.datetime) -> None:
    WorkflowSignal.objects.filter(id=signal_id).update(
        status=SignalStatus.APPLIED, applied_step=step, applied_at=now
    )


def create_update(
    *,
    instance_id: str,
    run_id: uuid.UUID | None,
    command_id: uuid.UUID,
    name: str,
    arguments: dict[str, Any],
    status: str,
    now: dt.datetime,
    rejection_reason: str | None = None,
    failure_message: str = "",
) -> UpdateRecord:
    row = WorkflowUpdate.objects.create(
        id=uuid7(),
        instance_id=instance_id,
        run_id=run_id,
        command_id=command_id,
        update_name=name,
        arguments=arguments,
        status=status,
        rejection_reason=rejection_reason,
        failure_message=failure_message,
        accepted_at=now,
        closed_at=now if status == UpdateStatus.REJECTED else None,
    )
    return _update_record(row)


def pending_update_count(run_id: uuid.UUID) -> int:
    return WorkflowUpdate.objects.filter(run_id=run_id, status=UpdateStatus.ACCEPTED).count()


def get_update(update_id: uuid.UUID | str) -> UpdateRecord | None:
    row = WorkflowUpdate.objects.filter(id=update_id).first()
    return _update_record(row) if row else None


def update_of_command(command_id: uuid.UUID) -> UpdateRecord | None:
    """The update a command recorded (``None``: it was refused before the run was known)."""
    row = WorkflowUpdate.objects.filter(command_id=command_id).first()
    return None if row is None else _update_record(row)


def mark_update_applied(update_id: str, *, step: int) -> None:
    WorkflowUpdate.objects.filter(id=update_id).update(applied_step=step)


def close_update(
    update_id: str,
    *,
    status: str,
    now: dt.datetime,
    result: dict[str, Any] | None = None,
    failure_message: str = "",
) -> None:
    WorkflowUpdate.objects.filter(id=update_id).update(
        status=status, result=result, failure_message=failure_message, closed_at=now
    )
    command_id = WorkflowUpdate.objects.filter(id=update_id).values_list("command_id", flat=True)
    outcome = "update_completed" if status == UpdateStatus.COMPLETED else "update_failed"
    WorkflowCommand.objects.filter(id__in=command_id).update(outcome=outcome)


def cancel_timer_of_step(run_id: uuid.UUID, step: int) -> uuid.UUID | None:
    """Cancel the pending timer recorded at ``step`` and its task; returns the timer id."""
    timer = Timer.objects.filter(run_id=run_id, sequence=step).first()
    if timer is None:
        return None
    if timer.status == TimerStatus.PENDING:
        Timer.objects.filter(id=timer.id).update(status=TimerStatus.CANCELLED)
        Task.objects.filter(timer_id=timer.id, status=TaskStatus.READY).update(
            status=TaskStatus.CANCELLED
        )
    return timer.id


def open_updates(run_id: uuid.UUID) -> list[tuple[str, str]]:
    """(id, name) of the run's accepted updates that have not closed."""
    rows = WorkflowUpdate.objects.filter(run_id=run_id, status=UpdateStatus.ACCEPTED)
    return [(str(row_id), name) for row_id, name in rows.values_list("id", "update_name")]


#: Inputs a run may hold unconsumed when it continues as new, with the id key of each.
_INPUT_IDS = {
    "SignalReceived": "signal_id",
    "UpdateAccepted": "update_id",
    "MessageReceived": "message_id",
}


def carry_pending_inputs(old_run_id: uuid.UUID, new_run_id: uuid.UUID) -> list[Event]:
    """Signals, updates and messages the run received but never consumed move to the next run.

    Returns their events for the new run's history in the order the old run
    recorded them (each marked ``carried_from_run_id``); their rows now belong
    to the new run.
    """
    signals = _ids(WorkflowSignal.objects.filter(run_id=old_run_id, status=SignalStatus.RECEIVED))
    updates = _ids(
        WorkflowUpdate.objects.filter(
            run_id=old_run_id, status=UpdateStatus.ACCEPTED, applied_step__isnull=True
        )
    )
    messages = _ids(WorkflowMessage.objects.filter(target_run_id=old_run_id, status="pending"))
    wanted = signals | updates | messages
    found: list[Event] = []
    if not wanted:
        return found
    # Newest first, stopping once every pending input is found: a long run that sheds
    # its history holds its unconsumed inputs near the end.
    events = HistoryEvent.objects.filter(run_id=old_run_id, event_type__in=_INPUT_IDS).order_by(
        "-sequence"
    )
    for event_type, payload in events.values_list("event_type", "payload").iterator(chunk_size=100):
        input_id = str(payload.get(_INPUT_IDS[event_type]))
        if input_id in wanted:
            wanted.discard(input_id)
            found.append((event_type, {**payload, "carried_from_run_id": str(old_run_id)}))
            if not wanted:
                break
    WorkflowSignal.objects.filter(id__in=signals).update(run_id=new_run_id)
    WorkflowUpdate.objects.filter(id__in=updates).update(run_id=new_run_id)
    WorkflowMessage.objects.filter(id__in=messages).update(target_run_id=new_run_id)
    return found[::-1]


def _ids(rows: QuerySet[Any]) -> set[str]:
    return {str(row_id) for row_id in rows.values_list("id", flat=True)}
