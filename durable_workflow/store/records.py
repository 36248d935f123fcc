"""Plain records the store hands out (no ORM objects leave the store).

A record's fields are the one list of the columns the store reads for it: the store
modules select :func:`columns` of the record and build it with :func:`reader`, and
``tests/unit/test_record_columns.py`` checks every record against its model (a column
added to a model must be carried by the record or named there as left out).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")

#: ``metadata`` of a record field that is the record's own bookkeeping, not a column.
NOT_A_COLUMN = MappingProxyType({"column": False})


def columns(record: type[DataclassInstance]) -> tuple[str, ...]:
    """The fields of ``record`` that are columns (attribute names, in declaration order)."""
    return tuple(f.name for f in dataclasses.fields(record) if f.metadata.get("column", True))


def reader(record: type[R]) -> Callable[[object], R]:
    """``record`` built from a row object (an ORM instance or a ``sql.Built``) that has
    each of its :func:`columns` as an attribute; the names are resolved once, here."""
    names = columns(record)
    leading = tuple(f.name for f in dataclasses.fields(record) if f.init)[: len(names)]
    if leading != names:  # the values go in by position
        raise TypeError(f"{record.__name__}: fields that are no column must come last")
    build: Callable[..., R] = record  # takes the columns first, in order (checked above)
    values = operator.attrgetter(*names)
    if len(names) == 1:  # an attrgetter of one name answers the value, not a tuple

        def read(row: object) -> R:
            return build(values(row))

    else:

        def read(row: object) -> R:
            return build(*values(row))

    return read


@dataclass
class RunRecord:
    """A run as read under its row lock; the executor edits it, the store saves it."""

    id: uuid.UUID
    namespace: str
    instance_id: str
    run_number: int
    workflow_type: str
    workflow_class: str
    status: str
    closed_reason: str | None
    payload_codec: str
    arguments: dict[str, Any]
    output: dict[str, Any] | None
    queue: str | None
    connection: str | None
    next_sequence: int
    workflow_task_sequence: int
    history_size_bytes: int
    started_at: dt.datetime | None
    closed_at: dt.datetime | None
    created_at: dt.datetime
    business_key: str | None = None
    workflow_definition_fingerprint: str = ""
    cancel_requested_at: dt.datetime | None = None
    parent_run_id: uuid.UUID | None = None
    parent_sequence: int | None = None
    parent_close_policy: str | None = None
    execution_deadline_at: dt.datetime | None = None
    run_deadline_at: dt.datetime | None = None
    compatibility: str | None = None
    sticky_worker_id: str | None = None
    sticky_until: dt.datetime | None = None
    archived_at: dt.datetime | None = None
    #: ``waiting`` / ``held`` on a queue limiting its runs (``executor.workflow_gate``).
    queue_slot: str | None = None
    dirty: set[str] = field(default_factory=set, repr=False, metadata=NOT_A_COLUMN)
    #: Events appended through this record (this transaction), as a read would return them.
    appended: list[Any] = field(
        default_factory=list, repr=False, compare=False, metadata=NOT_A_COLUMN
    )
    #: Whether child calls, pending timers and activities (besides those this transaction
    #: settles) were open when a statement under this lock looked, for a closing in the
    #: same transaction; ``None`` when nobody looked or this transaction may open more.
    open_work: tuple[bool, bool, bool] | None = field(
        default=None, repr=False, compare=False, metadata=NOT_A_COLUMN
    )

    @property
    def history_length(self) -> int:
        return self.next_sequence - 1

    def label(self) -> str:
        """How log lines name the run: what a person knows (type and instance) first."""
        return f"{self.workflow_type} instance {self.instance_id!r} (run {self.id})"

    def set(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
            self.dirty.add(key)


@dataclass(frozen=True)
class InstanceRecord:
    namespace: str
    instance_id: str
    workflow_type: str
    status: str
    current_run_id: uuid.UUID | None
    created_at: dt.datetime


@dataclass(frozen=True)
class TaskRecord:
    id: uuid.UUID
    run_id: uuid.UUID
    task_type: str
    status: str
    available_at: dt.datetime
    queue: str | None
    connection: str | None
    activity_execution_id: uuid.UUID | None = None
    timer_id: uuid.UUID | None = None
    attempt_count: int = 0
    lease_id: uuid.UUID | None = None
    lease_generation: int = 0
    lease_owner: str | None = None
    lease_expires_at: dt.datetime | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    compatibility: str | None = None
    sticky_worker_id: str | None = None
    sticky_until: dt.datetime | None = None
    #: Messages sent for the task so far (re-sends and hand-backs included).
    dispatch_count: int = 0
    #: Order among the waiting tasks of a limited queue, and the message's priority.
    priority: int = 5


@dataclass(frozen=True)
class ActivityRecord:
    id: uuid.UUID
    run_id: uuid.UUID
    sequence: int
    activity_type: str
    activity_class: str
    status: str
    arguments: dict[str, Any]
    options: dict[str, Any]
    queue: str | None
    connection: str | None
    attempt_count: int
    current_attempt_id: uuid.UUID | None
    scheduled_at: dt.datetime
    #: The last heartbeat progress (of an earlier attempt, when read at a claim).
    last_heartbeat_progress: dict[str, Any] | None = None


@dataclass(frozen=True)
class AttemptRecord:
    id: uuid.UUID
    execution_id: uuid.UUID
    attempt_number: int
    status: str
    task_id: uuid.UUID | None


@dataclass(frozen=True)
class TimerRecord:
    id: uuid.UUID
    run_id: uuid.UUID
    sequence: int
    status: str
    delay_seconds: float
    fire_at: dt.datetime


@dataclass(frozen=True)
class CommandRecord:
    id: uuid.UUID
    instance_id: str
    run_id: uuid.UUID | None
    command_type: str
    status: str
    outcome: str
    rejection_reason: str | None


@dataclass(frozen=True)
class WorkerMarkers:
    """A live worker registration: who, which queues, which compatibility markers."""

    worker_id: str
    queues: tuple[str, ...]
    markers: tuple[str, ...]
    last_heartbeat_at: dt.datetime


@dataclass(frozen=True)
class WaitingTask:
    """A ready task whose compatibility marker no live worker supports."""

    task_id: uuid.UUID
    run_id: uuid.UUID
    instance_id: str
    task_type: str
    compatibility: str
    queue: str | None
    connection: str | None
    available_at: dt.datetime
