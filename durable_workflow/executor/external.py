"""The body's messages to other workflows: a signal, or a request to cancel.

Each is sent in the workflow task's transaction, like a client's, and its outcome
(accepted, or why not) goes into the sender's history.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.engine import commands as c
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.executor.closing import request_cancel
from durable_workflow.executor.intake import send_signal
from durable_workflow.headers import with_headers
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def signal_workflow(run: RunRecord, command: c.SignalExternal, *, now: dt.datetime) -> list[Event]:
    """Send the body's signal to another workflow; its outcome goes into history."""
    arguments = envelope.decode(command.arguments, expected_codec=run.payload_codec)
    payload: dict[str, Any] = {
        "sequence": command.step,
        "target_instance_id": command.instance_id,
        "target_run_id": command.run_id,
        "signal_name": command.signal_name,
    }
    with_headers(payload, command.headers)
    try:
        sent = send_signal(
            command.instance_id,
            command.signal_name,
            arguments,
            run_id=command.run_id,
            source="workflow",
            metadata={"sender_instance_id": run.instance_id, "sender_run_id": str(run.id)},
            headers=command.headers,
            namespace=run.namespace,
        )
    except WorkflowNotFoundError:
        payload.update(_not_found())
    else:
        payload.update(_outcome(sent))
    return [(EventType.EXTERNAL_SIGNAL_SENT, payload)]


def cancel_workflow(run: RunRecord, command: c.CancelExternal, *, now: dt.datetime) -> list[Event]:
    """Ask another workflow to cancel; the request's outcome goes into history."""
    payload: dict[str, Any] = {
        "sequence": command.step,
        "target_instance_id": command.instance_id,
        "target_run_id": command.run_id,
        "reason": command.reason,
    }
    try:
        requested = request_cancel(
            command.instance_id,
            run_id=command.run_id,
            reason=command.reason,
            source="workflow",
            namespace=run.namespace,
        )
    except WorkflowNotFoundError:
        payload.update(_not_found())
    else:
        payload.update(_outcome(requested))
    return [(EventType.EXTERNAL_CANCEL_REQUESTED, payload)]


def _outcome(result: Any) -> dict[str, Any]:
    return {
        "target_run_id": str(result.run_id) if result.run_id else None,
        "command_id": str(result.command_id),
        "outcome": result.outcome,
        "rejection_reason": result.rejection_reason,
    }


def _not_found() -> dict[str, Any]:
    return {
        "command_id": None,
        "outcome": "rejected_not_found",
        "rejection_reason": "instance_not_found",
    }
