"""A run's history, read a column at a time for replay, is what the ORM reads, with
the per-row work of the single-row path left out."""

from __future__ import annotations

import datetime as dt
import gc
import json
import uuid

import pytest
from django.test import override_settings

from durable_workflow.engine import gcpause
from durable_workflow.engine.events import HistoryEvent as Event
from durable_workflow.models import HistoryEvent
from durable_workflow.store import columns, history
from tests.engine_db import connection
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = [
    {},
    {"nested": {"list": [1, "two", None, 2.5, True]}, "sequence": 3},
    {"text": 'naïve ☃ \u2028 "quoted" \\ back', "big": 2**62, "small": -(2**62)},
    {"local_activity": False, "float": 1e-7, "empty": [], "inner": {}},
]


@pytest.fixture
def run_id(inline) -> uuid.UUID:
    return uuid.UUID(start("tests.sequential", "history-read", "ada").run_id())


def _add(run_id: uuid.UUID, payloads: list[dict], at: dt.datetime) -> None:
    first = 1 + max(HistoryEvent.objects.filter(run_id=run_id).values_list("sequence", flat=True))
    HistoryEvent.objects.bulk_create(
        HistoryEvent(
            run_id=run_id,
            sequence=first + n,
            event_type="MemoUpserted",
            payload=payload,
            # Times shared by neighbours (one task's events) and times of their own.
            recorded_at=at + dt.timedelta(microseconds=(n // 2) * 999_999),
        )
        for n, payload in enumerate(payloads)
    )


def _orm(run_id: uuid.UUID, **where) -> list[Event]:
    rows = HistoryEvent.objects.filter(run_id=run_id, **where).order_by("sequence")
    fields = ("sequence", "event_type", "payload", "recorded_at")
    return [Event(*row) for row in rows.values_list(*fields)]


def test_the_history_read_is_what_the_orm_reads(run_id):
    _add(run_id, PAYLOADS * 3, dt.datetime(2026, 3, 29, 0, 59, 59, 999_999, tzinfo=dt.UTC))
    events = history.load_history(run_id)
    assert events == _orm(run_id)
    for mine, theirs in zip(events, _orm(run_id), strict=True):
        assert type(mine.payload) is type(theirs.payload)
        assert mine.recorded_at.tzinfo is theirs.recorded_at.tzinfo  # the very same zone
    assert history.load_history(run_id, after_sequence=4, up_to=9) == _orm(
        run_id, sequence__gt=4, sequence__lte=9
    )
    assert history.load_history(run_id, after_sequence=10_000) == []


def test_the_payloads_of_a_read_are_parsed_in_one_call(run_id, monkeypatch):
    _add(run_id, PAYLOADS * 50, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    calls: list[int] = []
    loads = json.loads

    def counted(text, **kwargs):
        calls.append(len(text))
        return loads(text, **kwargs)

    monkeypatch.setattr(columns.json, "loads", counted)
    events = history.load_history(run_id)
    assert len(events) > 200
    assert len(calls) == 1  # not one parse per row


@pytest.mark.skipif(connection.vendor != "postgresql", reason="times as PostgreSQL sends them")
def test_times_come_through_the_drivers_own_loader():
    # Django's loader for timestamptz is pure Python and costs more than the rest of the row.
    statement = history.history_statement(uuid.uuid4())
    assert "AT TIME ZONE 'UTC'" in statement.sql


def test_a_cold_workflow_task_reads_and_replays_with_the_collector_off(inline, monkeypatch):
    monkeypatch.setattr(gcpause, "MANY_EVENTS", 1)
    seen: list[bool] = []
    load = history.load_history

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return load(*args, **kwargs)

    monkeypatch.setattr(history, "load_history", watched)
    with override_settings(DURABLE_WORKFLOW={"STICKY_ENABLED": False}):
        stub = start("tests.many-steps", "collector", 3)
        inline.run()
    assert stub.result() is not None
    assert seen and not any(seen)
    assert gc.isenabled()
