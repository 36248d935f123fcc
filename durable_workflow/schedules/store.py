"""Every ORM read and write for schedules, their fire slots and their audit stream."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Any

from django.db import IntegrityError
from django.db.models import Q

from durable_workflow.models.schedules import (
    ScheduleFire,
    ScheduleFireKind,
    ScheduleFireStatus,
    ScheduleHistoryEvent,
    ScheduleStatus,
    WorkflowSchedule,
)
from durable_workflow.schedules.errors import ScheduleAlreadyExistsError
from durable_workflow.schedules.records import FireRecord, ScheduleEvent, ScheduleRecord
from durable_workflow.store import database, records

_record = records.reader(ScheduleRecord)


def _fire(row: ScheduleFire) -> FireRecord:
    return FireRecord(
        schedule_ulid=row.schedule_id,
        instance_id=row.instance_id,
        kind=row.kind,
        status=row.status,
        occurrence_time=row.occurrence_time,
        run_id=row.run_id,
        skip_reason=row.skip_reason,
    )


def insert_schedule(*, now: dt.datetime, **values: Any) -> ScheduleRecord:
    """Insert a new schedule; its id must be free in the namespace (deleted ones aside)."""
    try:
        with database.atomic():
            row = WorkflowSchedule.objects.create(created_at=now, updated_at=now, **values)
    except IntegrityError:
        raise ScheduleAlreadyExistsError(
            f"schedule {values['schedule_id']!r} already exists "
            f"in namespace {values['namespace']!r}"
        ) from None
    return _record(row)


def find(namespace: str, schedule_id: str) -> ScheduleRecord | None:
    """The live schedule with this id, else the most recently deleted one."""
    rows = WorkflowSchedule.objects.filter(namespace=namespace, schedule_id=schedule_id)
    live = rows.exclude(status=ScheduleStatus.DELETED).first()
    if live is not None:
        return _record(live)
    deleted = rows.order_by("-deleted_at", "-created_at").first()
    return _record(deleted) if deleted else None


def get(ulid: uuid.UUID) -> ScheduleRecord | None:
    row = WorkflowSchedule.objects.filter(id=ulid).first()
    return _record(row) if row else None


def lock(ulid: uuid.UUID, *, skip_locked: bool = False) -> ScheduleRecord | None:
    """Lock the row for this transaction; with ``skip_locked``, None if another holds it."""
    skip = skip_locked and database.connection().features.has_select_for_update_skip_locked
    row = WorkflowSchedule.objects.select_for_update(skip_locked=skip).filter(id=ulid).first()
    return _record(row) if row else None


def save(record: ScheduleRecord, *, now: dt.datetime) -> None:
    if not record.dirty:
        return
    changes = {name: getattr(record, name) for name in record.dirty}
    record.updated_at = now
    WorkflowSchedule.objects.filter(id=record.id).update(updated_at=now, **changes)
    record.dirty.clear()


def page(
    *,
    namespace: str,
    statuses: Collection[str],
    workflow_type: str | None,
    after: tuple[str, uuid.UUID] | None,
    limit: int,
) -> list[ScheduleRecord]:
    """Schedules of a namespace in (schedule id, ULID) order, after the keyset ``after``."""
    rows = WorkflowSchedule.objects.filter(namespace=namespace, status__in=list(statuses))
    if workflow_type is not None:
        rows = rows.filter(workflow_type=workflow_type)
    if after is not None:
        schedule_id, ulid = after
        rows = rows.filter(Q(schedule_id__gt=schedule_id) | Q(schedule_id=schedule_id, id__gt=ulid))
    return [_record(row) for row in rows.order_by("schedule_id", "id")[:limit]]


def due_schedule_ids(*, now: dt.datetime, limit: int | None) -> list[uuid.UUID]:
    """Active schedules whose next fire time has come, earliest first."""
    rows = WorkflowSchedule.objects.filter(
        status=ScheduleStatus.ACTIVE, next_fire_at__lte=now
    ).order_by("next_fire_at", "id")
    ids = rows.values_list("id", flat=True)
    return list(ids[:limit] if limit else ids)


def buffered_schedule_ids(*, limit: int | None) -> list[uuid.UUID]:
    """Active schedules holding buffered fires, which may be ready to drain."""
    rows = WorkflowSchedule.objects.filter(
        status=ScheduleStatus.ACTIVE, buffered_count__gt=0
    ).order_by("next_fire_at", "id")
    ids = rows.values_list("id", flat=True)
    return list(ids[:limit] if limit else ids)


# ------------------------------------------------------------------ fire slots
def claim_fire(
    schedule: ScheduleRecord,
    *,
    instance_id: str,
    kind: str,
    status: str,
    occurrence_time: dt.datetime,
    now: dt.datetime,
    skip_reason: str | None = None,
) -> bool:
    """Claim a fire slot; False when it was claimed before (by anyone, ever)."""
    try:
        with database.atomic():
            ScheduleFire.objects.create(
                schedule_id=schedule.id,
                instance_id=instance_id,
                kind=kind,
                status=status,
                occurrence_time=occurrence_time,
                skip_reason=skip_reason,
                created_at=now,
                updated_at=now,
            )
    except IntegrityError:
        return False
    return True


def update_fire(
    schedule: ScheduleRecord, instance_id: str, *, now: dt.datetime, **changes: Any
) -> None:
    ScheduleFire.objects.filter(schedule_id=schedule.id, instance_id=instance_id).update(
        updated_at=now, **changes
    )


def manual_fire_count(schedule: ScheduleRecord) -> int:
    """Manual triggers the schedule recorded so far (the caller holds its lock)."""
    return ScheduleFire.objects.filter(
        schedule_id=schedule.id, kind=ScheduleFireKind.MANUAL
    ).count()


def get_fire(schedule: ScheduleRecord, instance_id: str) -> FireRecord | None:
    row = ScheduleFire.objects.filter(schedule_id=schedule.id, instance_id=instance_id).first()
    return _fire(row) if row else None


def oldest_buffered_fire(schedule: ScheduleRecord) -> FireRecord | None:
    row = (
        ScheduleFire.objects.filter(schedule_id=schedule.id, status=ScheduleFireStatus.BUFFERED)
        .order_by("occurrence_time", "id")
        .first()
    )
    return _fire(row) if row else None


def discard_buffered(schedule: ScheduleRecord, *, reason: str, now: dt.datetime) -> int:
    return ScheduleFire.objects.filter(
        schedule_id=schedule.id, status=ScheduleFireStatus.BUFFERED
    ).update(status=ScheduleFireStatus.SKIPPED, skip_reason=reason, updated_at=now)


# ---------------------------------------------------------------- audit stream
def append_event(
    schedule: ScheduleRecord,
    event_type: str,
    payload: dict[str, Any],
    *,
    now: dt.datetime,
    instance_id: str | None = None,
    run_id: uuid.UUID | str | None = None,
) -> int:
    """Append one audit event at the schedule's next sequence (the caller holds its lock)."""
    sequence = schedule.last_event_sequence + 1
    ScheduleHistoryEvent.objects.create(
        schedule_ulid=schedule.id,
        namespace=schedule.namespace,
        schedule_id=schedule.schedule_id,
        sequence=sequence,
        event_type=event_type,
        payload=payload,
        workflow_instance_id=instance_id,
        workflow_run_id=run_id,
        recorded_at=now,
    )
    schedule.set(last_event_sequence=sequence)
    return sequence


def load_events(
    ulid: uuid.UUID, *, after_sequence: int = 0, limit: int | None = None
) -> list[ScheduleEvent]:
    rows = ScheduleHistoryEvent.objects.filter(
        schedule_ulid=ulid, sequence__gt=after_sequence
    ).order_by("sequence")
    if limit:
        rows = rows[:limit]
    return [
        ScheduleEvent(
            sequence=row.sequence,
            event_type=row.event_type,
            payload=row.payload,
            workflow_instance_id=row.workflow_instance_id,
            workflow_run_id=row.workflow_run_id,
            recorded_at=row.recorded_at,
        )
        for row in rows
    ]
