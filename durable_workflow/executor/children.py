"""Child workflows: starting them, and telling the parent how they ended.

Lock order is always parent before child. A closing child never locks its
parent: it records its outcome on the parent's ``ChildCall`` row and flags (or
creates) a parent workflow task; that task copies the news into the parent's
history under the parent's own lock before it replays.

A closing parent's close policies are in ``closing``; the body's signals and cancel
requests to other workflows are in ``external``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from durable_workflow.engine import commands as c
from durable_workflow.engine.events import EventType
from durable_workflow.executor.common import wake_for_news
from durable_workflow.executor.start import start_workflow
from durable_workflow.headers import with_headers
from durable_workflow.models import ChildCallStatus
from durable_workflow.options import StartOptions
from durable_workflow.store import children
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]

#: Run status of a closed child -> (ChildCall status, parent history event).
CHILD_OUTCOMES = {
    "completed": (ChildCallStatus.COMPLETED, EventType.CHILD_RUN_COMPLETED),
    "failed": (ChildCallStatus.FAILED, EventType.CHILD_RUN_FAILED),
    "cancelled": (ChildCallStatus.CANCELLED, EventType.CHILD_RUN_CANCELLED),
    "terminated": (ChildCallStatus.TERMINATED, EventType.CHILD_RUN_TERMINATED),
}
_EVENT_OF_STATUS: dict[str, EventType] = {
    status: event for status, event in CHILD_OUTCOMES.values()
}


def start_child(run: RunRecord, command: c.StartChild, *, now: dt.datetime) -> list[Event]:
    """Start the child in this transaction: its run exists (or its id was taken) before
    the parent's task commits."""
    instance_id = command.instance_id
    options = command.options
    policy = options.get("parent_close_policy", "abandon")
    scheduled = {
        "sequence": command.step,
        "child_instance_id": instance_id,
        "child_workflow_type": command.workflow_type,
        "child_workflow_class": command.workflow_class,
        "parent_close_policy": policy,
        **(command.group or {}),
    }
    with_headers(scheduled, options.get("headers"))
    started = start_workflow(
        instance_id=instance_id,
        workflow_type=command.workflow_type,
        workflow_class=command.workflow_class,
        arguments=[],
        encoded_arguments=command.arguments,
        payload_codec=run.payload_codec,
        options=StartOptions(
            headers=options.get("headers") or {}, priority=options.get("priority")
        ),
        queue=options.get("queue"),
        connection=options.get("connection"),
        source="parent_workflow",
        parent={
            "parent_run_id": run.id,
            "parent_sequence": command.step,
            "parent_close_policy": policy,
        },
        parent_instance_id=run.instance_id,
        namespace=run.namespace,  # a child lives in its parent's namespace
    )
    if not started.accepted:
        refused = {
            "sequence": command.step,
            "child_instance_id": instance_id,
            "child_workflow_type": command.workflow_type,
            "command_id": str(started.command_id),
            "outcome": started.outcome,
            "rejection_reason": started.rejection_reason,
        }
        return [
            (EventType.CHILD_WORKFLOW_SCHEDULED, scheduled),
            (EventType.CHILD_WORKFLOW_START_REJECTED, refused),
        ]
    call = children.create_call(
        parent_run_id=run.id,
        sequence=command.step,
        child_instance_id=instance_id,
        child_workflow_type=command.workflow_type,
        child_run_id=started.run_id,
        parent_close_policy=policy,
        now=now,
    )
    run_started = {
        "sequence": command.step,
        "child_call_id": str(call.id),
        "child_workflow_run_id": str(started.run_id),
    }
    return [
        (EventType.CHILD_WORKFLOW_SCHEDULED, {**scheduled, "child_call_id": str(call.id)}),
        (EventType.CHILD_RUN_STARTED, run_started),
    ]


def notify_parent(run: RunRecord, outcome: dict[str, Any], *, now: dt.datetime) -> None:
    """A child run closed: leave its outcome where the parent's next task will find it."""
    if run.parent_run_id is None or run.parent_sequence is None:
        return
    status = CHILD_OUTCOMES[run.status][0]
    children.record_outcome(
        run.parent_run_id, run.parent_sequence, status=status, outcome=outcome, now=now
    )
    wake_parent(run.parent_run_id, now=now)


def wake_parent(parent_run_id: uuid.UUID, *, now: dt.datetime) -> None:
    wake_for_news(parent_run_id, now=now)


def report_children(run: RunRecord) -> list[Event]:
    """Events for child news the parent's history lacks (new child runs, outcomes)."""
    events: list[Event] = []
    for call in children.needing_report(run.id):
        base = {"sequence": call.sequence, "child_call_id": str(call.id)}
        if call.child_run_id is not None and call.child_run_id != call.reported_run_id:
            events.append(
                (
                    EventType.CHILD_RUN_STARTED,
                    {**base, "child_workflow_run_id": str(call.child_run_id)},
                )
            )
        closed = call.status not in children.OPEN
        if closed and call.status in _EVENT_OF_STATUS:
            payload = {
                **base,
                "child_workflow_run_id": str(call.child_run_id),
                **(call.outcome or {}),
            }
            events.append((_EVENT_OF_STATUS[call.status], payload))
        children.mark_reported(call.id, run_id=call.child_run_id, outcome=closed)
    return events
