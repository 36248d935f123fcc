"""The history table's indexes: a run's events of one type are found by index.

The admin timeline filtered by event type asks for one run's events of one type in
sequence order (``admin/timeline.build_page``); migration 0021 gives that query its
own index, (run, event_type, sequence). The index on the run alone went in 0020: the
unique (run, sequence) index already covers it.
"""

from __future__ import annotations

import pytest

from durable_workflow import clock
from durable_workflow.models import HistoryEvent, WorkflowRun
from tests.engine_db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _indexes() -> dict[str, dict]:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, HistoryEvent._meta.db_table)


def test_the_run_and_event_type_index_exists_and_the_run_only_index_is_gone():
    found = _indexes()
    assert found["dw_history_run_type"]["columns"] == ["run_id", "event_type", "sequence"]
    assert found["dw_history_run_type"]["index"]
    alone = [
        name
        for name, spec in found.items()
        if spec["columns"] == ["run_id"] and spec["index"] and not spec["foreign_key"]
    ]
    assert alone == []
    unique = [spec for spec in found.values() if spec["unique"] and not spec["primary_key"]]
    assert [spec["columns"] for spec in unique] == [["run_id", "sequence"]]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan is PostgreSQL's")
def test_a_filtered_timeline_uses_the_index_on_postgresql():
    now = clock.now()
    runs = [
        WorkflowRun.objects.create(
            instance_id=f"idx-{n}", workflow_type="t", created_at=now, updated_at=now
        )
        for n in range(3)
    ]
    kinds = ("ActivityScheduled", "ActivityStarted", "ActivityCompleted")
    HistoryEvent.objects.bulk_create(
        HistoryEvent(run=run, sequence=s, event_type=kinds[s % 3], payload={}, recorded_at=now)
        for run in runs
        for s in range(1, 200)
    )
    query = (
        HistoryEvent.objects.filter(
            run_id=runs[1].id, event_type="ActivityCompleted", sequence__gt=0
        )
        .order_by("sequence")
        .values_list("sequence", "event_type", "payload", "recorded_at")[:101]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE durable_workflow_history_event")
        cursor.execute("SET enable_seqscan = off")
        try:
            plan = query.explain()
        finally:
            cursor.execute("RESET enable_seqscan")
    assert "dw_history_run_type" in plan, plan


def _index_names(model: type) -> set[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {name for name, spec in found.items() if spec["index"]}


def test_the_open_work_indexes_exist():
    from durable_workflow.models import ActivityExecution

    assert {
        "dw_run_open",
        "dw_run_open_execution_deadline",
        "dw_run_open_run_deadline",
        "dw_run_started",
    } <= _index_names(WorkflowRun)
    assert "dw_activity_open" in _index_names(ActivityExecution)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_indexes is PostgreSQL's")
def test_the_open_work_indexes_are_partial_on_postgresql():
    """Only open rows are indexed: the indexes stay small however many closed rows pile up
    (their plans on a seeded database are in docs/performance.md)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)",
            [["dw_activity_open", "dw_run_open", "dw_run_open_execution_deadline"]],
        )
        found = dict(cursor.fetchall())
    assert "WHERE" in found["dw_activity_open"] and "pending" in found["dw_activity_open"]
    for name in ("dw_run_open", "dw_run_open_execution_deadline"):
        assert "NOT" in found[name] and "completed" in found[name], found[name]
