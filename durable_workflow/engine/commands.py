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


@dataclass(frozen=True, slots=True)
class StartTimer:
    step: int
    delay_seconds: int


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


Command = ScheduleActivity | StartTimer | RecordSideEffect | RecordFailureHandled
CloseCommand = CompleteWorkflow | FailWorkflow
