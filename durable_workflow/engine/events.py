"""History event names (durable wire strings) and the plain event record."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventType(StrEnum):
    START_ACCEPTED = "StartAccepted"
    WORKFLOW_STARTED = "WorkflowStarted"
    WORKFLOW_COMPLETED = "WorkflowCompleted"
    WORKFLOW_FAILED = "WorkflowFailed"
    WORKFLOW_TIMED_OUT = "WorkflowTimedOut"
    WORKFLOW_CANCELLED = "WorkflowCancelled"
    WORKFLOW_TERMINATED = "WorkflowTerminated"
    WORKFLOW_CONTINUED_AS_NEW = "WorkflowContinuedAsNew"
    #: An operator archived the closed run; written after its closing event.
    WORKFLOW_ARCHIVED = "WorkflowArchived"
    REPAIR_REQUESTED = "RepairRequested"
    CANCEL_REQUESTED = "CancelRequested"
    TERMINATE_REQUESTED = "TerminateRequested"
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    ACTIVITY_STARTED = "ActivityStarted"
    ACTIVITY_HEARTBEAT_RECORDED = "ActivityHeartbeatRecorded"
    ACTIVITY_RETRY_SCHEDULED = "ActivityRetryScheduled"
    ACTIVITY_COMPLETED = "ActivityCompleted"
    ACTIVITY_FAILED = "ActivityFailed"
    ACTIVITY_CANCELLED = "ActivityCancelled"
    ACTIVITY_TIMED_OUT = "ActivityTimedOut"
    TIMER_SCHEDULED = "TimerScheduled"
    TIMER_FIRED = "TimerFired"
    TIMER_CANCELLED = "TimerCancelled"
    SIDE_EFFECT_RECORDED = "SideEffectRecorded"
    FAILURE_HANDLED = "FailureHandled"
    SIGNAL_RECEIVED = "SignalReceived"
    SIGNAL_WAIT_OPENED = "SignalWaitOpened"
    SIGNAL_APPLIED = "SignalApplied"
    CONDITION_WAIT_OPENED = "ConditionWaitOpened"
    CONDITION_WAIT_SATISFIED = "ConditionWaitSatisfied"
    CONDITION_WAIT_TIMED_OUT = "ConditionWaitTimedOut"
    UPDATE_ACCEPTED = "UpdateAccepted"
    UPDATE_REJECTED = "UpdateRejected"
    UPDATE_APPLIED = "UpdateApplied"
    UPDATE_COMPLETED = "UpdateCompleted"
    CHILD_WORKFLOW_SCHEDULED = "ChildWorkflowScheduled"
    CHILD_RUN_STARTED = "ChildRunStarted"
    CHILD_RUN_COMPLETED = "ChildRunCompleted"
    CHILD_RUN_FAILED = "ChildRunFailed"
    CHILD_RUN_CANCELLED = "ChildRunCancelled"
    CHILD_RUN_TERMINATED = "ChildRunTerminated"
    #: A child the body started under an instance id that was already taken.
    CHILD_WORKFLOW_START_REJECTED = "ChildWorkflowStartRejected"
    PARENT_CLOSE_POLICY_APPLIED = "ParentClosePolicyApplied"
    PARENT_CLOSE_POLICY_FAILED = "ParentClosePolicyFailed"
    SELECTION_RESOLVED = "SelectionResolved"
    SELECTION_OPERATION_CANCELLED = "SelectionOperationCancelled"
    VERSION_MARKER_RECORDED = "VersionMarkerRecorded"
    SCHEDULE_TRIGGERED = "ScheduleTriggered"
    MESSAGE_RECEIVED = "MessageReceived"
    MESSAGE_CURSOR_ADVANCED = "MessageCursorAdvanced"
    MESSAGE_SENT = "MessageSent"
    MEMO_UPSERTED = "MemoUpserted"
    SEARCH_ATTRIBUTES_UPSERTED = "SearchAttributesUpserted"
    #: A signal / cancel request the body sent to another workflow, with its outcome.
    EXTERNAL_SIGNAL_SENT = "ExternalSignalSent"
    EXTERNAL_CANCEL_REQUESTED = "ExternalCancelRequested"


#: Events written because the body asked for something; keyed by step. (A
#: TimerScheduled that carries a ``timer_kind`` is the timeout of a wait and
#: belongs to that wait's step instead.)
COMMAND_EVENTS = frozenset(
    {
        EventType.ACTIVITY_SCHEDULED,
        EventType.TIMER_SCHEDULED,
        EventType.SIDE_EFFECT_RECORDED,
        EventType.SIGNAL_WAIT_OPENED,
        EventType.CONDITION_WAIT_OPENED,
        EventType.CHILD_WORKFLOW_SCHEDULED,
        EventType.MEMO_UPSERTED,
        EventType.SEARCH_ATTRIBUTES_UPSERTED,
        EventType.MESSAGE_CURSOR_ADVANCED,
        EventType.MESSAGE_SENT,
        EventType.EXTERNAL_SIGNAL_SENT,
        EventType.EXTERNAL_CANCEL_REQUESTED,
    }
)

#: Command events that also carry the command's outcome, recorded in the same workflow
#: task: the body waits at the step and resumes when the event is delivered.
OUTCOME_COMMAND_EVENTS = frozenset(
    {EventType.EXTERNAL_SIGNAL_SENT, EventType.EXTERNAL_CANCEL_REQUESTED}
)

#: Inputs from outside the body that are not tied to a step.
MESSAGE_EVENTS = frozenset(
    {EventType.SIGNAL_RECEIVED, EventType.UPDATE_ACCEPTED, EventType.MESSAGE_RECEIVED}
)

#: Events that resolve a step the body is waiting on, delivered in log order.
RESOLUTION_EVENTS = frozenset(
    {
        EventType.ACTIVITY_COMPLETED,
        EventType.ACTIVITY_FAILED,
        EventType.ACTIVITY_TIMED_OUT,
        EventType.ACTIVITY_CANCELLED,
        EventType.TIMER_FIRED,
        EventType.CHILD_RUN_COMPLETED,
        EventType.CHILD_RUN_FAILED,
        EventType.CHILD_RUN_CANCELLED,
        EventType.CHILD_RUN_TERMINATED,
        EventType.CHILD_WORKFLOW_START_REJECTED,
    }
)

#: Events that close a run; nothing may follow them.
TERMINAL_EVENTS = frozenset(
    {
        EventType.WORKFLOW_COMPLETED,
        EventType.WORKFLOW_FAILED,
        EventType.WORKFLOW_TIMED_OUT,
        EventType.WORKFLOW_CANCELLED,
        EventType.WORKFLOW_TERMINATED,
        EventType.WORKFLOW_CONTINUED_AS_NEW,
    }
)


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One row of a run's append-only history, as the engine sees it."""

    sequence: int
    event_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    recorded_at: dt.datetime | None = None

    @property
    def step(self) -> int | None:
        """The body step this event belongs to, when it belongs to one."""
        value = self.payload.get("sequence")
        return int(value) if value is not None else None
