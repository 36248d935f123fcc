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


def test_a_worker_parks_a_body_that_reads_the_clock_and_runs_its_activities(start_worker):
    from durable_workflow.models import Task

    start_worker()
    guarded = WorkflowStub.make("tests.unsafe", "accept-unsafe")
    guarded.start("time.time")
    clean = WorkflowStub.make("tests.many-steps", "accept-clean")
    clean.start(3)
    clean.wait(timeout=60)  # the worker's own clock and ids work as before
    assert clean.status() == "completed"
    wait_for(
        lambda: Task.objects.filter(run_id=guarded.run_id(), status="failed").exists(),
        timeout=60,
    )
    task = Task.objects.get(run_id=guarded.run_id(), status="failed")
    assert "NonDeterministicCallError" in task.last_error and "time.time" in task.last_error


@pytest.mark.slow  # two worker start-ups and a lease to expire: `make test-all` (CI)
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


def test_workflow_waits_for_a_signal_sent_from_another_process(start_worker):
    start_worker()
    stub = WorkflowStub.make("tests.approval", "accept-signal")
    stub.start("signal")
    wait_for(lambda: stub.refresh().status() == "waiting", timeout=30, message="never waited")
    assert stub.query("current-stage") == "waiting"
    stub.signal("approved-by", "from the test process")
    stub.wait(timeout=30)
    assert stub.status() == "completed"
    assert stub.output() == "from the test process"


def test_update_round_trip_through_a_worker(start_worker):
    start_worker()
    stub = WorkflowStub.make("tests.approval", "accept-update")
    stub.start("condition-forever")
    wait_for(lambda: stub.refresh().status() == "waiting", timeout=30, message="never waited")
    assert stub.update("mark-ready", True) == {"ready": True}
    stub.wait(timeout=30)
    assert stub.output() == [True, []]


def test_a_200_way_fanout_completes(start_worker):
    start_worker()
    start_worker()
    stub = WorkflowStub.make("tests.fanout", "accept-fanout")
    stub.start(200)
    stub.wait(timeout=240)
    assert stub.status() == "completed", stub.status()
    assert stub.output() == list(range(200))
    assert_history_exactly_once(stub)


def test_child_on_another_queue_is_served_by_another_worker(start_worker):
    from durable_workflow.models import Task, WorkflowRun

    start_worker(queues="celery")
    start_worker(queues="children")
    stub = WorkflowStub.make("tests.parent", "accept-child-queue")
    stub.start("queued-child")
    stub.wait(timeout=60)
    assert stub.status() == "completed"
    assert stub.output() == {"echo": 8}
    child = WorkflowRun.objects.get(parent_run_id=stub.run_id())
    assert child.queue == "children"
    parent_owners = set(
        Task.objects.filter(run_id=stub.run_id(), task_type="workflow").values_list(
            "lease_owner", flat=True
        )
    )
    child_owners = set(
        Task.objects.filter(run_id=child.id, task_type="workflow").values_list(
            "lease_owner", flat=True
        )
    )
    assert parent_owners and child_owners and not parent_owners & child_owners
