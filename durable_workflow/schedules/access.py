"""Finding a schedule from what callers hold, and locking it for one change."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Iterator

from durable_workflow import clock, text
from durable_workflow.schedules import store
from durable_workflow.schedules.errors import ScheduleDeletedError, ScheduleNotFoundError
from durable_workflow.schedules.policies import ScheduleStatus
from durable_workflow.schedules.records import ScheduleDescription, ScheduleRecord
from durable_workflow.store import database

#: A schedule id, or a description / record handed out earlier.
ScheduleRef = str | ScheduleDescription | ScheduleRecord


def default_namespace() -> str:
    from durable_workflow import namespaces

    return namespaces.default()


def load(schedule: ScheduleRef, namespace: str | None = None) -> ScheduleRecord:
    if isinstance(schedule, ScheduleRecord):
        record = store.get(schedule.id)
    elif isinstance(schedule, ScheduleDescription):
        record = store.get(uuid.UUID(schedule.schedule_ulid))
    elif text.problem(schedule, max_length=128) is not None:
        record = None  # no schedule id holds it: nothing to ask the database
    else:
        record = store.find(namespace or default_namespace(), schedule)
    if record is None:
        raise ScheduleNotFoundError(f"no schedule {schedule!r}")
    return record


@contextlib.contextmanager
def locked(
    schedule: ScheduleRef, namespace: str | None = None
) -> Iterator[tuple[ScheduleRecord, dt.datetime]]:
    """A transaction on the locked schedule row; the record is saved on a clean exit."""
    ulid = load(schedule, namespace).id
    with database.atomic():
        record = store.lock(ulid)
        assert record is not None  # schedule rows are never removed outright
        now = clock.now()
        yield record, now
        store.save(record, now=now)


def refuse_deleted(record: ScheduleRecord, verb: str) -> None:
    if record.status == ScheduleStatus.DELETED:
        raise ScheduleDeletedError(
            f"schedule {record.schedule_id!r} is deleted and cannot be {verb}"
        )
