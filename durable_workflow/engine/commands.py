"""What a workflow task asks the executor to make durable.

Commands are plain values produced by the runtime; the executor turns each one
into history events, rows and tasks inside the workflow-task transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Envelope = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScheduleActivity:
    step: int
    activity_type: str
    activity_class: str
    arguments: Envelope
    options: dict[str, Any]
    queue: str | None = None
    connection: str | None = None
    #: ``parallel_group_*`` / ``selection_*`` metadata when scheduled by all() or select().
    group: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StartTimer:
    step: int
    #: Seconds, to the millisecond (an int when whole).
    delay_seconds: float
    #: ``None`` for ``timer()``; ``signal_timeout`` / ``condition_timeout`` for a wait's deadline.
    kind: str | None = None
    group: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StartChild:
    step: int
    workflow_type: str
    workflow_class: str
    arguments: Envelope
    options: dict[str, Any]
    #: The child's instance id: ``ChildWorkflowOptions.instance_id``, or derived from
    #: the parent run and the step.
    instance_id: str
    group: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SignalExternal:
    """Signal another workflow; the executor records ``ExternalSignalSent`` with the outcome."""

    step: int
    instance_id: str
    run_id: str | None
    signal_name: str
    arguments: Envelope
    #: Sent with the signal (``signal_external`` interceptors).
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CancelExternal:
    """Ask another workflow to cancel; recorded as ``ExternalCancelRequested``."""

    step: int
    instance_id: str
    run_id: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class CancelActivity:
    """A select() loser the body cancelled explicitly."""

    step: int
    selection: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordSelection:
    """SelectionResolved / SelectionOperationCancelled facts (the marker events)."""

    event_type: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordVersionMarker:
    change_id: str
    version: int
    min_supported: int
    max_supported: int
    sequence: int
    marker_kind: str = "version"


@dataclass(frozen=True, slots=True)
class UpsertVisibility:
    """``upsert_memo`` (kind ``memo``) or ``upsert_search_attributes`` (``search_attributes``)."""

    step: int
    kind: str
    entries: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AdvanceCursor:
    step: int
    stream_key: str
    cursor: int
    message_ids: list[str]


@dataclass(frozen=True, slots=True)
class SendMessage:
    step: int
    stream_key: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ContinueAsNew:
    arguments: Envelope
    #: Stream cursors the next run starts from.
    message_cursors: dict[str, int] = field(default_factory=dict)
    #: Headers the next run starts with (this run's start headers).
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RecordSideEffect:
    step: int
    result: Envelope


@dataclass(frozen=True, slots=True)
class RecordFailureHandled:
    step: int
    exception_type: str
    message: str


@dataclass(frozen=True, slots=True)
class FailureInfo:
    """A Python exception flattened into durable, language-neutral fields."""

    exception_type: str
    exception_class: str
    message: str
    traceback: str = ""
    category: str = "application"
    non_retryable: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompleteWorkflow:
    result: Envelope


@dataclass(frozen=True, slots=True)
class FailWorkflow:
    failure: FailureInfo


@dataclass(frozen=True, slots=True)
class CancelWorkflow:
    """The body finished after a cancel request reached it."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class OpenSignalWait:
    step: int
    signal_name: str
    timeout_seconds: float | None


@dataclass(frozen=True, slots=True)
class ApplySignal:
    """A received signal was consumed by a wait (``step``) or a handler."""

    step: int
    signal_id: str
    signal_name: str
    by_handler: bool = False


@dataclass(frozen=True, slots=True)
class OpenConditionWait:
    step: int
    condition_key: str | None
    fingerprint: str
    timeout_seconds: float | None


@dataclass(frozen=True, slots=True)
class ResolveConditionWait:
    step: int
    satisfied: bool


@dataclass(frozen=True, slots=True)
class CancelTimer:
    step: int


@dataclass(frozen=True, slots=True)
class ApplyUpdate:
    update_id: str
    update_name: str
    step: int


@dataclass(frozen=True, slots=True)
class CompleteUpdate:
    update_id: str
    update_name: str
    result: Envelope | None = None
    failure: FailureInfo | None = None


Command = (
    ScheduleActivity
    | StartChild
    | SignalExternal
    | CancelExternal
    | CancelActivity
    | RecordSelection
    | RecordVersionMarker
    | AdvanceCursor
    | SendMessage
    | UpsertVisibility
    | StartTimer
    | RecordSideEffect
    | RecordFailureHandled
    | OpenSignalWait
    | ApplySignal
    | OpenConditionWait
    | ResolveConditionWait
    | CancelTimer
    | ApplyUpdate
    | CompleteUpdate
)
CloseCommand = CompleteWorkflow | FailWorkflow | CancelWorkflow | ContinueAsNew
