"""End to end with real Celery worker processes, Redis and PostgreSQL."""

from __future__ import annotations

from collections import Counter

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt, ActivityExecution, HistoryEvent
from tests.acceptance.conftest import wait_for
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def assert_history_exactly_once(stub: WorkflowStub) -> None:
    events = list(HistoryEvent.objects.filter(run_id=stub.run_id()).order_by("sequence"))
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    terminal = Counter(
        e.payload["activity_execution_id"]
        for e in events
        if e.event_type in ("ActivityCompleted", "ActivityFailed")
    )
    scheduled = [
        e.payload["activity_execution_id"] for e in events if e.event_type == "ActivityScheduled"
    ]
    assert sorted(terminal) == sorted(scheduled)
    assert set(terminal.values()) == {1}


def test_worker_runs_a_multi_activity_workflow(start_worker):
    start_worker()
    stub = WorkflowStub.make("tests.many-steps", "accept-many")
    stub.start(10)
    stub.wait(timeout=60)
    assert stub.status() == "completed", [e.event_type for e in stub.history()]
    assert stub.output() == 45
    assert_history_exactly_once(stub)
    assert Invocation.objects.filter(name="add").count() == 10


def test_sigkill_mid_activity_then_another_worker_finishes(start_worker):
    first = start_worker(lease_seconds=3)
    stub = WorkflowStub.make("tests.kill-me", "accept-kill")
    stub.start(120)
    wait_for(
        lambda: Invocation.objects.filter(name="sleepy").exists(),
        timeout=60,
        message="the slow activity never started",
    )
    first.kill()  # mid-activity: no ack, no settlement, the lease is left to expire

    start_worker(lease_seconds=3)
    stub.wait(timeout=90)
    assert stub.status() == "completed", [e.event_type for e in stub.history()]
    assert stub.output() == ["hello before", "woke on attempt 2", 42]
    assert_history_exactly_once(stub)

    sleepy = ActivityExecution.objects.get(run_id=stub.run_id(), activity_type="tests.sleepy")
    attempts = list(ActivityAttempt.objects.filter(execution=sleepy).order_by("attempt_number"))
    assert [a.status for a in attempts] == ["expired", "completed"]
    assert Invocation.objects.filter(name="greet").count() == 1  # never re-run
    assert Invocation.objects.filter(name="add").count() == 1
