"""Durable timers, and constant database work per step."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest
from django.db import connection

from durable_workflow import clock, executor
from durable_workflow.models import Task, Timer
from tests.conftest import scaled
from tests.integration.helpers import event_types, events_of, start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_timer_waits_for_the_clock_not_the_broker(inline):
    # Frozen: the workflow reports the time it slept, which real seconds passing during
    # a slow run would lengthen (it said "slept 3602" on a loaded machine).
    clock.freeze()
    stub = start("tests.sleeper", "sleep-1", 3600)
    inline.run()
    stub.refresh()
    assert stub.status() == "waiting"
    timer = Timer.objects.get(run_id=stub.run_id())
    assert timer.status == "pending" and timer.delay_seconds == 3600
    scheduled = events_of(stub, "TimerScheduled")[0]
    assert scheduled["delay_seconds"] == 3600
    task = tasks_of(stub, "timer")[0]
    assert task.available_at == timer.fire_at

    # a message delivered early (broker countdowns are capped) changes nothing
    assert executor.run_timer_task(task.id) == "early"
    assert Timer.objects.get(id=timer.id).status == "pending"

    clock.advance(dt.timedelta(seconds=1800))
    inline.run()
    assert stub.refresh().status() == "waiting"
    clock.advance(dt.timedelta(seconds=1801))
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == "slept 3601"
    assert Timer.objects.get(id=timer.id).status == "fired"
    assert event_types(stub)[-3:] == ["TimerScheduled", "TimerFired", "WorkflowCompleted"]


def test_thirty_day_timer(inline):
    clock.freeze()  # the reported time slept must not include real seconds (see above)
    stub = start("tests.sleeper", "sleep-30d", 30 * 86400)
    inline.run()
    clock.advance(dt.timedelta(days=30, seconds=1))
    inline.run()
    assert stub.refresh().output() == "slept 2592001"


def test_timer_task_for_a_closed_run_does_nothing(inline):
    stub = start("tests.sleeper", "sleep-closed", 10)
    inline.run()
    from durable_workflow.models import WorkflowRun

    WorkflowRun.objects.filter(id=stub.run_id()).update(status="terminated")
    clock.advance(dt.timedelta(seconds=11))
    inline.run()
    assert Timer.objects.get(run_id=stub.run_id()).status == "pending"
    assert "TimerFired" not in event_types(stub)


@contextlib.contextmanager
def count_queries():
    counter = {"queries": 0}

    def wrapper(execute, sql, params, many, context):
        counter["queries"] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield counter


def _queries_for_next_workflow_task(stub) -> int:
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    with count_queries() as counter:
        assert executor.run_workflow_task(task.id) == "completed"
    return counter["queries"]


def _queries_for_next_activity_task(stub) -> int:
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    with count_queries() as counter:
        assert executor.run_activity_task(task.id) == "completed"
    return counter["queries"]


def test_database_work_per_step_does_not_grow_with_history(inline):
    steps = scaled(300)
    stub = start("tests.many-steps", "queries-1", steps + 100)
    counts = []
    for step in range(steps):
        wf = _queries_for_next_workflow_task(stub)
        act = _queries_for_next_activity_task(stub)
        if step in (3, steps - 1):
            counts.append((wf, act))
    assert counts[0] == counts[1], counts
    print("queries per step (workflow task, activity task):", counts[0])
    workflow_queries, activity_queries = counts[0]
    # workflow task: lock + claim + one history read + inserts + settle, in one transaction
    assert workflow_queries <= 14, workflow_queries
    assert activity_queries <= 20, activity_queries  # includes the activity's own 2 queries


def test_scheduling_a_fan_out_costs_the_same_for_5_and_for_25_activities(inline):
    # (SQLite splits an insert past 999 parameters: about 40 activities here.)
    counts = []
    for count in (5, 25):
        stub = start("tests.fanout", f"queries-fan-{count}", count)
        counts.append(_queries_for_next_workflow_task(stub))
        assert Task.objects.filter(run_id=stub.run_id(), task_type="activity").count() == count
        assert event_types(stub).count("ActivityScheduled") == count
    assert counts[0] == counts[1], counts
