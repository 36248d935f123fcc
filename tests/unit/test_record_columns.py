"""Each record the store hands out against its table: no column drifts unnoticed.

A record's fields are the one list of what the store reads for it (the store selects
``records.columns(Record)``). When a model gains a column, this test fails until the
column is either carried by the record or named below as one the record leaves out;
a record field that is no column of its model fails too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from types import SimpleNamespace

import pytest
from django.db.models import Model

from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    Task,
    Timer,
    WorkflowCommand,
    WorkflowInstance,
    WorkflowRun,
    WorkflowSchedule,
    WorkflowUpdate,
)
from durable_workflow.schedules.records import ScheduleRecord
from durable_workflow.store.children import ChildCallRecord
from durable_workflow.store.messages import UpdateRecord
from durable_workflow.store.records import (
    NOT_A_COLUMN,
    ActivityRecord,
    AttemptRecord,
    CommandRecord,
    InstanceRecord,
    RunRecord,
    TaskRecord,
    TimerRecord,
    columns,
    reader,
)

#: Record, its model, and the model's columns (attribute names) the record leaves out.
RECORDS: list[tuple[type, type[Model], set[str]]] = [
    (
        RunRecord,
        WorkflowRun,
        {
            "labels",
            "memo",
            "search_attributes",
            "execution_timeout_seconds",
            "run_timeout_seconds",
            "continued_from_id",
            "reset_from_run_id",
            "reset_to_run_id",
            "reset_point",
            "last_progress_at",
            "deduplication_id",
            "priority",
            "updated_at",
        },
    ),
    (InstanceRecord, WorkflowInstance, {"key", "business_key", "run_count", "updated_at"}),
    (
        TaskRecord,
        Task,
        {
            "namespace",
            "leased_at",
            "last_dispatched_at",
            "last_error",
            "sticky_replay_mode",
            "sticky_claimed_at",
            "queue_wait",
            "lease_node",
            "created_at",
            "updated_at",
        },
    ),
    (
        ActivityRecord,
        ActivityExecution,
        {
            "result",
            "started_at",
            "closed_at",
            "last_heartbeat_at",
            "schedule_to_close_deadline_at",
            "schedule_to_start_deadline_at",
            "worker_session_id",
        },
    ),
    (
        AttemptRecord,
        ActivityAttempt,
        {
            "lease_owner",
            "lease_expires_at",
            "retry_reason",
            "started_at",
            "last_heartbeat_at",
            "closed_at",
            "start_to_close_deadline_at",
            "heartbeat_deadline_at",
        },
    ),
    (TimerRecord, Timer, {"fired_at", "timer_kind", "created_at"}),
    (
        CommandRecord,
        WorkflowCommand,
        {"namespace", "source", "reason", "payload", "metadata", "created_at"},
    ),
    (ScheduleRecord, WorkflowSchedule, set()),
    (ChildCallRecord, ChildCall, {"created_at", "closed_at"}),
    (UpdateRecord, WorkflowUpdate, {"arguments", "applied_step"}),
]


def _ids(entry: tuple[type, type[Model], set[str]]) -> str:
    return entry[0].__name__


@pytest.mark.parametrize("entry", RECORDS, ids=_ids)
def test_record_carries_or_names_every_column(entry: tuple[type, type[Model], set[str]]) -> None:
    record, model, left_out = entry
    table = {field.attname for field in model._meta.concrete_fields}
    carried = set(columns(record))
    assert carried - table == set(), f"{record.__name__} fields that are no column"
    assert left_out - table == set(), f"left out for {record.__name__} but no column"
    assert carried & left_out == set(), f"{record.__name__} carries what it says it leaves out"
    unaccounted = table - carried - left_out
    assert unaccounted == set(), (
        f"{model.__name__} columns {sorted(unaccounted)} are neither carried by "
        f"{record.__name__} nor listed as left out in this test"
    )


def test_bookkeeping_fields_are_not_columns() -> None:
    every = {field.name for field in dataclasses.fields(RunRecord)}
    assert every - set(columns(RunRecord)) == {"dirty", "appended", "open_work"}
    assert "dirty" not in columns(ScheduleRecord)


def test_reader_builds_the_record_from_a_row_object() -> None:
    now = dt.datetime.now(dt.UTC)
    values = {
        "id": uuid.uuid4(),
        "run_id": uuid.uuid4(),
        "sequence": 3,
        "status": "pending",
        "delay_seconds": 1.5,
        "fire_at": now,
    }
    row = SimpleNamespace(**values, created_at=now, timer_kind="")
    assert reader(TimerRecord)(row) == TimerRecord(**values)


def test_reader_keeps_bookkeeping_defaults() -> None:
    row = SimpleNamespace(**{name: None for name in columns(RunRecord)})
    record = reader(RunRecord)(row)
    assert record.dirty == set() and record.appended == [] and record.open_work is None


@dataclasses.dataclass
class _Misordered:
    dirty: set[str] = dataclasses.field(default_factory=set, metadata=NOT_A_COLUMN)
    id: int = 0


@dataclasses.dataclass
class _Single:
    id: int


def test_reader_edges() -> None:
    with pytest.raises(TypeError, match="must come last"):
        reader(_Misordered)
    assert reader(_Single)(SimpleNamespace(id=7)) == _Single(7)
