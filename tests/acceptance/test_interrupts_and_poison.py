"""Interrupts and poison workflow tasks with real Celery worker processes."""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt, Task, WorkflowFailure
from durable_workflow.operations.health import health
from tests.acceptance.conftest import wait_for
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _stopped(worker) -> bool:
    return worker.process.poll() is not None


@pytest.mark.parametrize("kind", ["interrupt", "exit"])
def test_an_interrupted_activity_stops_its_worker_and_runs_on_another(start_worker, kind):
    first = start_worker()
    stub = WorkflowStub.make("tests.interrupted-activity", f"accept-interrupt-{kind}")
    stub.start(kind)
    wait_for(lambda: _stopped(first), timeout=60, message=first.output())
    assert "raised in a task: this worker shuts down" in first.output()
    assert "WorkerLostError" not in first.output() and "Traceback" not in first.output()
    attempt = ActivityAttempt.objects.get(execution__run_id=stub.run_id())
    assert attempt.status == "cancelled"  # handed back at once: no lease to wait for
    assert Task.objects.get(run_id=stub.run_id(), task_type="activity").status == "ready"

    second = start_worker()
    stub.wait(timeout=60)
    assert stub.refresh().output() == "done on attempt 2", second.output()
    assert not WorkflowFailure.objects.filter(run_id=stub.run_id()).exists()
    statuses = ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).order_by(
        "attempt_number"
    )
    assert [a.status for a in statuses] == ["cancelled", "completed"]  # nothing expired


def test_an_interrupted_body_stops_its_worker_and_runs_on_another(start_worker, tmp_path):
    flag = tmp_path / "interrupt-once"
    flag.write_text("armed")
    first = start_worker()
    stub = WorkflowStub.make("tests.interrupted-once", "accept-interrupt-body")
    stub.start("interrupt", str(flag))
    wait_for(lambda: _stopped(first), timeout=60, message=first.output())
    assert not flag.exists()  # the body ran, and was interrupted
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow")
    assert (task.status, task.attempt_count) == ("ready", 0)

    start_worker()
    stub.wait(timeout=60)
    assert stub.refresh().output() == "5"
    assert not WorkflowFailure.objects.filter(run_id=stub.run_id()).exists()


def test_a_workflow_task_that_kills_its_worker_is_parked_and_named(start_worker, tmp_path):
    """Each attempt kills its worker process (a prefork child): after
    ``WORKFLOW_TASK_MAX_ATTEMPTS`` (2) counted attempts the task is parked, not re-sent
    for ever, and the health check names the run."""
    trace = tmp_path / "attempts"
    worker = start_worker(pool="prefork", env={"DW_WORKFLOW_TASK_MAX_ATTEMPTS": "2"})
    stub = WorkflowStub.make("tests.crashing", "accept-poison")
    stub.start(str(trace))
    task = lambda: Task.objects.get(run_id=stub.run_id(), task_type="workflow")  # noqa: E731
    wait_for(lambda: task().status == "failed", timeout=120, message=worker.output())
    # The first death left no trace; the next two were counted before they ran; the
    # fourth delivery found two counted attempts that never finished.
    assert len(trace.read_text().split()) == 3
    assert task().attempt_count == 2
    row = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert row.exception_class == "durable_workflow.exceptions.WorkflowTaskAttemptsExceeded"
    assert row.details["task_failure_reason"] == "repeated_attempts"
    assert stub.refresh().running() and stub.describe().parked
    snapshot, status = health(include_broker=False)
    resume = next(c for c in snapshot["checks"] if c["id"] == "durable_resume_paths")
    assert status == 503 and "accept-poison" in resume["message"]
    assert Invocation.objects.count() == 0


def test_a_body_that_kills_its_worker_after_an_activity_runs_at_most_attempts_plus_one(
    start_worker, tmp_path
):
    """The reliability suite's poison workflow: the body dies after an activity, so the
    task its result wakes is the poison one. With eager workflow tasks that body first
    runs inside the transaction recording the activity's result, whose death takes the
    result with it (the activity runs again once its lease expires). The body must still
    run at most ``WORKFLOW_TASK_MAX_ATTEMPTS`` + 1 times before the task is parked."""
    trace = tmp_path / "attempts"
    env = {"DW_WORKFLOW_TASK_MAX_ATTEMPTS": "2"}
    worker = start_worker(pool="prefork", lease_seconds=3, env=env)
    stub = WorkflowStub.make("tests.crashing-after-step", "accept-poison-after-step")
    stub.start(str(trace))
    parked = lambda: stub.refresh().running() and stub.describe().parked  # noqa: E731
    wait_for(parked, timeout=120, message=worker.output())
    assert len(trace.read_text().split()) <= 3, worker.output()
    row = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert row.details["task_failure_reason"] == "repeated_attempts"
