"""Plain records for schedules; no ORM object leaves the schedule store."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.schedules.audit import timestamp
from durable_workflow.schedules.specs import ScheduleSpec
from durable_workflow.store.records import NOT_A_COLUMN


@dataclass
class ScheduleRecord:
    """A schedule as read (under its row lock when it will change)."""

    id: uuid.UUID
    namespace: str
    schedule_id: str
    status: str
    spec: dict[str, Any]
    workflow_type: str
    workflow_class: str
    arguments: dict[str, Any]
    overlap_policy: str
    jitter_seconds: int
    max_runs: int | None
    remaining_actions: int | None
    connection: str | None
    queue: str | None
    labels: dict[str, Any]
    memo: dict[str, Any]
    search_attributes: dict[str, Any]
    notes: str | None
    next_fire_at: dt.datetime | None
    last_fired_at: dt.datetime | None
    fires_count: int
    latest_instance_id: str | None
    last_skip_reason: str | None
    last_skipped_at: dt.datetime | None
    skipped_trigger_count: int
    buffered_count: int
    last_event_sequence: int
    paused_at: dt.datetime | None
    deleted_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    dirty: set[str] = field(default_factory=set, repr=False, metadata=NOT_A_COLUMN)

    def set(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
            self.dirty.add(key)

    def parsed_spec(self) -> ScheduleSpec:
        return ScheduleSpec.parse(self.spec)

    def input(self) -> list[Any]:
        return list(envelope.decode(self.arguments))

    def action(self) -> dict[str, Any]:
        return {
            "workflow_type": self.workflow_type,
            "workflow_class": self.workflow_class,
            "input": envelope.to_inspection_json(self.input()),
        }

    def primary_cron(self) -> str | None:
        crons = self.spec.get("cron_expressions") or []
        return crons[0] if crons else None


@dataclass(frozen=True)
class FireRecord:
    schedule_ulid: uuid.UUID
    instance_id: str
    kind: str
    status: str
    occurrence_time: dt.datetime
    run_id: uuid.UUID | None
    skip_reason: str | None


@dataclass(frozen=True)
class ScheduleEvent:
    """One row of a schedule's audit stream."""

    sequence: int
    event_type: str
    payload: dict[str, Any]
    workflow_instance_id: str | None
    workflow_run_id: uuid.UUID | None
    recorded_at: dt.datetime


@dataclass(frozen=True)
class ScheduleDescription:
    """What ``ScheduleManager.describe`` reports; ``to_dict()`` gives the JSON form."""

    schedule_id: str
    namespace: str
    schedule_ulid: str
    status: str
    spec: dict[str, Any]
    action: dict[str, Any]
    overlap_policy: str
    fires_count: int
    next_fire_at: dt.datetime | None
    last_fired_at: dt.datetime | None
    latest_instance_id: str | None
    jitter_seconds: int
    note: str | None
    last_skip_reason: str | None
    last_skipped_at: dt.datetime | None
    skipped_trigger_count: int
    max_runs: int | None
    remaining_actions: int | None
    buffered_count: int
    connection: str | None
    queue: str | None
    labels: dict[str, Any]
    memo: dict[str, Any]
    search_attributes: dict[str, Any]
    paused_at: dt.datetime | None
    deleted_at: dt.datetime | None
    created_at: dt.datetime

    @classmethod
    def of(cls, record: ScheduleRecord) -> ScheduleDescription:
        return cls(
            schedule_id=record.schedule_id,
            namespace=record.namespace,
            schedule_ulid=str(record.id),
            status=record.status,
            spec=dict(record.spec),
            action=record.action(),
            overlap_policy=record.overlap_policy,
            fires_count=record.fires_count,
            next_fire_at=record.next_fire_at,
            last_fired_at=record.last_fired_at,
            latest_instance_id=record.latest_instance_id,
            jitter_seconds=record.jitter_seconds,
            note=record.notes,
            last_skip_reason=record.last_skip_reason,
            last_skipped_at=record.last_skipped_at,
            skipped_trigger_count=record.skipped_trigger_count,
            max_runs=record.max_runs,
            remaining_actions=record.remaining_actions,
            buffered_count=record.buffered_count,
            connection=record.connection,
            queue=record.queue,
            labels=dict(record.labels),
            memo=dict(record.memo),
            search_attributes=dict(record.search_attributes),
            paused_at=record.paused_at,
            deleted_at=record.deleted_at,
            created_at=record.created_at,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, dt.datetime):
                out[key] = timestamp(value)
        return out

    to_array = to_dict


@dataclass(frozen=True)
class SchedulePage:
    """One page of ``ScheduleManager.list``: descriptions, and the cursor of the next page."""

    schedules: list[ScheduleDescription]
    #: Pass it as ``cursor=`` for the next page; ``None`` on the last one.
    next_cursor: str | None

    def __iter__(self) -> Iterator[ScheduleDescription]:
        return iter(self.schedules)

    def __len__(self) -> int:
        return len(self.schedules)
