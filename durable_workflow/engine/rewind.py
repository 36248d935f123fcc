"""Where a reset cuts a run's history, and what the new run keeps (pure: no database).

A reset point names an event; the new run keeps the history *before the last
completed workflow task boundary* at or before that event and replays it. The
rest runs again with the current code. History does not record workflow task
boundaries, so the cut backs off over events a workflow task writes (the body's
commands, its outcomes, local activities) until it stands just after an event
that came from outside the body (the start, an activity's outcome, a timer
firing, a signal...): no workflow task is ever split.

Steps the kept prefix opened but did not resolve (an activity still running, a
timer not fired, a signal or condition wait still open) are left out of it: the
body reaches them again on replay and issues them afresh, so the new run owns its
own activity, timer and task rows. Signals received after the cut are re-applied
(appended after the prefix, in the order the old run received them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from durable_workflow.engine.events import (
    RESOLUTION_EVENTS,
    TERMINAL_EVENTS,
    EventType,
    HistoryEvent,
)

#: Named reset points; an ``int`` names an event sequence instead.
POINT_KINDS = ("start", "first_failure", "last_workflow_task")

#: Events written from outside the body (a cut may stand just before one).
_INPUTS = frozenset(
    {
        EventType.START_ACCEPTED,
        EventType.WORKFLOW_STARTED,
        EventType.SCHEDULE_TRIGGERED,
        EventType.REPAIR_REQUESTED,
        EventType.CANCEL_REQUESTED,
        EventType.TERMINATE_REQUESTED,
        EventType.ACTIVITY_STARTED,
        EventType.ACTIVITY_HEARTBEAT_RECORDED,
        EventType.ACTIVITY_RETRY_SCHEDULED,
        EventType.ACTIVITY_COMPLETED,
        EventType.ACTIVITY_FAILED,
        EventType.ACTIVITY_TIMED_OUT,
        EventType.TIMER_FIRED,
        EventType.SIGNAL_RECEIVED,
        EventType.UPDATE_ACCEPTED,
        EventType.UPDATE_REJECTED,
        EventType.MESSAGE_RECEIVED,
        EventType.CHILD_RUN_STARTED,
        EventType.CHILD_RUN_COMPLETED,
        EventType.CHILD_RUN_FAILED,
        EventType.CHILD_RUN_CANCELLED,
        EventType.CHILD_RUN_TERMINATED,
        EventType.CHILD_WORKFLOW_START_REJECTED,
        EventType.WORKFLOW_TIMED_OUT,
        EventType.WORKFLOW_TERMINATED,
    }
)

#: Events that open a step which stays open until one of ``_CLOSES_STEP`` arrives.
_OPENS_STEP = frozenset(
    {
        EventType.ACTIVITY_SCHEDULED,
        EventType.TIMER_SCHEDULED,
        EventType.SIGNAL_WAIT_OPENED,
        EventType.CONDITION_WAIT_OPENED,
    }
)
#: Events of an open step that go with it when it is left out.
_OF_OPEN_STEP = _OPENS_STEP | {
    EventType.ACTIVITY_STARTED,
    EventType.ACTIVITY_HEARTBEAT_RECORDED,
    EventType.ACTIVITY_RETRY_SCHEDULED,
}
_CLOSES_STEP = RESOLUTION_EVENTS | {
    EventType.TIMER_CANCELLED,
    EventType.SIGNAL_APPLIED,
    EventType.CONDITION_WAIT_SATISFIED,
    EventType.CONDITION_WAIT_TIMED_OUT,
}
_FAILURES = frozenset(
    {
        EventType.ACTIVITY_FAILED,
        EventType.ACTIVITY_TIMED_OUT,
        EventType.CHILD_RUN_FAILED,
        EventType.WORKFLOW_FAILED,
        EventType.WORKFLOW_TIMED_OUT,
    }
)
#: A cut after one of these would replay a request to close the run.
_CLOSE_REQUESTS = frozenset({EventType.CANCEL_REQUESTED, EventType.TERMINATE_REQUESTED})
_CLOSING = _CLOSE_REQUESTS | {
    EventType.WORKFLOW_COMPLETED,
    EventType.WORKFLOW_FAILED,
    EventType.WORKFLOW_TIMED_OUT,
    EventType.WORKFLOW_CANCELLED,
    EventType.WORKFLOW_TERMINATED,
    EventType.WORKFLOW_CONTINUED_AS_NEW,
}

#: Refusal reasons (``ResetRefusedError.reason``), with what each means.
REFUSALS = {
    "unknown_point": "the point is not start, first_failure, last_workflow_task or an event",
    "unknown_event": "the run's history has no event with that sequence",
    "continued_as_new": "the run continued as new: reset the run it continued into",
    "not_current_run": "a later run of the instance exists: reset (or fork) from that one",
    "child_run": "the run is a child of another workflow: reset the parent instead",
    "no_failure": "the run has no failure (and is not parked on a failed workflow task)",
    "after_close_request": "the point is after a cancel or terminate request",
    "after_close": "the point is after the run closed",
    "child_in_flight": "a child workflow started before the point had not closed by it",
    "update_in_flight": "an update accepted before the point had not completed by it",
    "message_in_prefix": "a stream message was received before the point",
    "workflow_task_running": "a workflow task of the run is running now: try again",
    "instance_exists": "the fork's instance id is taken",
}


class RefusedPoint(Exception):
    """The point cannot be resumed; ``reason`` is one of :data:`REFUSALS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail or REFUSALS.get(reason, reason)}")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the new run's history holds, and why."""

    #: The point as asked (``start``, ``first_failure``, ``last_workflow_task`` or ``event``).
    kind: str
    #: The event the point names (``None``: the end of history, a parked run's failed task).
    event: int | None
    #: The first old sequence not kept: the cut.
    cut: int
    #: The old run's events the new run keeps, in order (open steps left out).
    kept: tuple[HistoryEvent, ...]
    #: Steps left out because the prefix did not resolve them (issued again on replay).
    reissued_steps: tuple[int, ...]
    #: Signals received at or after the cut, re-applied after the prefix.
    reapplied: tuple[HistoryEvent, ...]

    def describe(self) -> dict[str, Any]:
        """The JSON ``reset_point`` recorded on both runs."""
        return {
            "kind": self.kind,
            "event": self.event,
            "cut": self.cut,
            "kept_events": len(self.kept),
            "reissued_steps": list(self.reissued_steps),
            "reapplied_signals": len(self.reapplied),
        }


def _is_input(event: HistoryEvent) -> bool:
    return event.event_type in _INPUTS and not event.payload.get("local_activity")


def _target(events: Sequence[HistoryEvent], to: str | int, *, parked: bool) -> int | None:
    """The sequence of the event the point names; ``None`` for the end of history."""
    if isinstance(to, bool) or not isinstance(to, int | str):
        raise RefusedPoint("unknown_point")
    if isinstance(to, int):
        if not any(e.sequence == to for e in events):
            raise RefusedPoint("unknown_event", f"the history has no event {to}")
        return to
    if to == "start":
        started = [e.sequence for e in events if e.event_type == EventType.WORKFLOW_STARTED]
        after = [e.sequence for e in events if started and e.sequence > started[0]]
        following = [s for s in after if not _lineage(events, s)]
        return following[0] if following else None
    if to == "first_failure":
        failed = [e.sequence for e in events if e.event_type in _FAILURES]
        if failed:
            return failed[0]
        if parked:
            return None
        raise RefusedPoint("no_failure")
    if to == "last_workflow_task":
        closing = [e.sequence for e in events if e.event_type in _CLOSING]
        return closing[0] if closing else None
    raise RefusedPoint("unknown_point", f"unknown reset point {to!r}")


def _lineage(events: Sequence[HistoryEvent], sequence: int) -> bool:
    """The event right after the start that belongs to the start (``ScheduleTriggered``)."""
    return any(
        e.sequence == sequence and e.event_type == EventType.SCHEDULE_TRIGGERED for e in events
    )


def plan(events: Sequence[HistoryEvent], to: str | int, *, parked: bool = False) -> Plan:
    """The new run's history for a reset of a run with ``events`` to the point ``to``.

    ``parked``: the run is open and its latest workflow task failed (``first_failure``
    then means that task when no failure event precedes it). Raises
    :class:`RefusedPoint` when the point cannot be resumed.
    """
    if any(e.event_type == EventType.WORKFLOW_CONTINUED_AS_NEW for e in events):
        raise RefusedPoint("continued_as_new")
    target = _target(events, to, parked=parked)
    by_sequence = {e.sequence: e for e in events}
    if target is None:  # history holds whole workflow tasks only: keep it all
        cut = events[-1].sequence + 1 if events else 1
    else:
        cut = target
        # A task's events commit together, so the events before an input end a task;
        # the target itself written by a task: back off to where that task began.
        if not _is_input(by_sequence[cut]):
            while cut - 1 in by_sequence and not _is_input(by_sequence[cut - 1]):
                cut -= 1
    prefix = [e for e in events if e.sequence < cut]
    if not any(e.event_type == EventType.WORKFLOW_STARTED for e in prefix):
        started = [e for e in events if e.event_type == EventType.WORKFLOW_STARTED]
        prefix = [e for e in events if started and e.sequence <= started[0].sequence]
        cut = prefix[-1].sequence + 1 if prefix else 1
    _check_prefix(prefix)
    open_steps = _open_steps(prefix)
    kept = tuple(
        e
        for e in prefix
        if not (e.event_type in _OF_OPEN_STEP and e.step in open_steps and e.step is not None)
    )
    reapplied = tuple(
        e for e in events if e.sequence >= cut and e.event_type == EventType.SIGNAL_RECEIVED
    )
    return Plan(
        kind=to if isinstance(to, str) else "event",
        event=target,
        cut=cut,
        kept=kept,
        reissued_steps=tuple(sorted(open_steps)),
        reapplied=reapplied,
    )


def _check_prefix(prefix: Sequence[HistoryEvent]) -> None:
    kinds = {e.event_type for e in prefix}
    if kinds & _CLOSE_REQUESTS:
        raise RefusedPoint("after_close_request")
    if kinds & (TERMINAL_EVENTS | {EventType.WORKFLOW_ARCHIVED}):
        raise RefusedPoint("after_close")
    if EventType.MESSAGE_RECEIVED in kinds:
        raise RefusedPoint("message_in_prefix")
    children = {
        e.step
        for e in prefix
        if e.event_type == EventType.CHILD_WORKFLOW_SCHEDULED and e.step is not None
    }
    children -= {e.step for e in prefix if e.event_type in RESOLUTION_EVENTS}
    if children:
        raise RefusedPoint("child_in_flight", f"child step(s) {sorted(children)}")
    accepted = {
        e.payload.get("update_id") for e in prefix if e.event_type == EventType.UPDATE_ACCEPTED
    }
    accepted -= {
        e.payload.get("update_id") for e in prefix if e.event_type == EventType.UPDATE_COMPLETED
    }
    if accepted:
        raise RefusedPoint("update_in_flight", f"update(s) {sorted(map(str, accepted))}")


def _open_steps(prefix: Sequence[HistoryEvent]) -> set[int]:
    opened: set[int] = set()
    closed: set[int] = set()
    for event in prefix:
        step = event.step
        if step is None:
            continue
        if event.event_type in _OPENS_STEP:
            opened.add(step)
        elif event.event_type in _CLOSES_STEP:
            closed.add(step)
    return opened - closed


def unapplied_signals(kept: Sequence[HistoryEvent]) -> list[HistoryEvent]:
    """Signals the kept prefix received but did not apply (the new run applies them)."""
    applied = {e.payload.get("signal_id") for e in kept if e.event_type == EventType.SIGNAL_APPLIED}
    return [
        e
        for e in kept
        if e.event_type == EventType.SIGNAL_RECEIVED and e.payload.get("signal_id") not in applied
    ]
