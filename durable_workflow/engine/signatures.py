"""How a history event and a durable call are compared: their *signatures*.

A signature is ``(kind, name)``: ``("activity", "billing.charge")``,
``("timer", None)``. History records one per step; the body asks for one per
durable call; the two must agree step by step (see ``ledger.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from durable_workflow.engine.events import EventType, HistoryEvent

Signature = tuple[str, str | None]

SIGNATURE_OF_EVENT: dict[str, Callable[[dict[str, Any]], Signature]] = {
    EventType.ACTIVITY_SCHEDULED: lambda p: (
        "local_activity" if p.get("execution_mode") == "local" else "activity",
        p.get("activity_type"),
    ),
    EventType.TIMER_SCHEDULED: lambda p: ("timer", None),
    EventType.SIDE_EFFECT_RECORDED: lambda p: ("side_effect", None),
    EventType.SIGNAL_WAIT_OPENED: lambda p: ("signal", p.get("signal_name")),
    EventType.CONDITION_WAIT_OPENED: lambda p: ("condition", p.get("condition_key")),
    EventType.CHILD_WORKFLOW_SCHEDULED: lambda p: ("child", p.get("child_workflow_type")),
    EventType.MEMO_UPSERTED: lambda p: ("memo", None),
    EventType.SEARCH_ATTRIBUTES_UPSERTED: lambda p: ("search_attributes", None),
    EventType.MESSAGE_CURSOR_ADVANCED: lambda p: ("receive", p.get("stream_key")),
    EventType.MESSAGE_SENT: lambda p: ("send_message", p.get("stream_key")),
    EventType.EXTERNAL_SIGNAL_SENT: lambda p: ("external_signal", p.get("signal_name")),
    EventType.EXTERNAL_CANCEL_REQUESTED: lambda p: ("external_cancel", None),
}
_EVENT_OF_KIND = {
    "activity": EventType.ACTIVITY_SCHEDULED,
    "local_activity": EventType.ACTIVITY_SCHEDULED,
    "timer": EventType.TIMER_SCHEDULED,
    "side_effect": EventType.SIDE_EFFECT_RECORDED,
    "signal": EventType.SIGNAL_WAIT_OPENED,
    "condition": EventType.CONDITION_WAIT_OPENED,
    "child": EventType.CHILD_WORKFLOW_SCHEDULED,
    "memo": EventType.MEMO_UPSERTED,
    "search_attributes": EventType.SEARCH_ATTRIBUTES_UPSERTED,
    "receive": EventType.MESSAGE_CURSOR_ADVANCED,
    "send_message": EventType.MESSAGE_SENT,
    "external_signal": EventType.EXTERNAL_SIGNAL_SENT,
    "external_cancel": EventType.EXTERNAL_CANCEL_REQUESTED,
}

#: History events that record a fact the runtime itself produced, and their dedupe key.
MARKER_KEYS: dict[str, Callable[[dict[str, Any]], Hashable]] = {
    EventType.FAILURE_HANDLED: lambda p: ("handled", p.get("sequence")),
    EventType.SIGNAL_APPLIED: lambda p: ("signal", p.get("signal_id")),
    EventType.TIMER_CANCELLED: lambda p: ("timer_cancelled", p.get("sequence")),
    EventType.CONDITION_WAIT_SATISFIED: lambda p: ("condition", p.get("sequence")),
    EventType.CONDITION_WAIT_TIMED_OUT: lambda p: ("condition", p.get("sequence")),
    EventType.UPDATE_APPLIED: lambda p: ("update_applied", p.get("update_id")),
    EventType.UPDATE_COMPLETED: lambda p: ("update_completed", p.get("update_id")),
    EventType.SELECTION_RESOLVED: lambda p: ("selection", p.get("selection_group_id")),
    EventType.SELECTION_OPERATION_CANCELLED: lambda p: ("selection_cancel", p.get("sequence")),
}


def signature_of(event: HistoryEvent) -> Signature:
    """The signature a command event recorded (only for events in ``COMMAND_EVENTS``)."""
    return SIGNATURE_OF_EVENT[event.event_type](event.payload)


def describe_signature(sig: Signature) -> str:
    kind, name = sig
    label = _EVENT_OF_KIND.get(kind, kind)
    return f"{label}({name})" if name else str(label)
