"""Poison workflow tasks are parked after N attempts; interrupts never count as anything."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from durable_workflow import clock, executor
from durable_workflow.models import ActivityAttempt, Task
from durable_workflow.operations.doctor import DoctorContext, run_checks
from durable_workflow.signals import workflow_task_failed
from tests.integration.helpers import event_types, failures, start
from tests.testapp import hostile
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


class Died(BaseException):
    """Stands for the worker process dying mid-task: nothing after it runs in-process."""


def workflow_task(stub) -> Task:
    return Task.objects.filter(run_id=stub.run_id(), task_type="workflow").latest("created_at")


def resend(task: Task) -> None:
    """What the repair pass does to a ready task whose message got no outcome."""
    Task.objects.filter(id=task.id).update(dispatch_count=task.dispatch_count + 1)


@pytest.fixture
def broken_persist(monkeypatch):
    """Every workflow task fails past its body (an engine error, not the workflow's)."""
    from durable_workflow.executor import feeding as module

    def persist(*args, **kwargs):
        raise RuntimeError("persist exploded")

    monkeypatch.setattr(module, "persist", persist)


def test_a_workflow_task_that_keeps_failing_is_parked_after_its_attempts(
    inline, broken_persist, settings
):
    """Reported: a workflow task that failed was re-sent for ever, with no failure row."""
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "WORKFLOW_TASK_MAX_ATTEMPTS": 3}
    announced = []
    workflow_task_failed.connect(lambda sender, event, **kw: announced.append(event), weak=False)
    stub = start("tests.sequential", "poison-error", "ada")
    task = workflow_task(stub)
    try:
        outcomes = []
        for _ in range(6):
            try:
                outcomes.append(executor.run_workflow_task(task.id))
            except RuntimeError:
                outcomes.append("raised")
            task.refresh_from_db()
            if task.status != "ready":
                break
            resend(task)
            task.refresh_from_db()
    finally:
        workflow_task_failed.receivers.clear()
    assert outcomes == ["raised", "raised", "failed"]
    assert (task.status, task.attempt_count) == ("failed", 3)
    (row,) = failures(stub)
    assert (row.failure_category, row.exception_class, row.message) == (
        "task_failure",
        "builtins.RuntimeError",
        "persist exploded",
    )
    assert row.details["task_failure_reason"] == "repeated_attempts"
    assert row.details["attempts"] == 3
    assert [e.reason for e in announced] == ["repeated_attempts"]
    assert stub.refresh().status() == "pending" and stub.describe().parked
    check = {r.id: r for r in run_checks(DoctorContext(now=clock.now()))}
    assert "poison-error" in check["durable_resume_paths"].message


def test_a_database_connection_error_is_not_counted(inline, monkeypatch):
    from durable_workflow.executor import feeding as module

    def persist(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(module, "persist", persist)
    stub = start("tests.sequential", "poison-outage", "ada")
    task = workflow_task(stub)
    for _ in range(7):
        with pytest.raises(OperationalError):
            executor.run_workflow_task(task.id)
        resend(task)
        task.refresh_from_db()
    assert (task.status, task.attempt_count) == ("ready", 0)
    assert failures(stub) == []


def test_a_workflow_task_that_keeps_killing_its_worker_is_parked(inline, monkeypatch, settings):
    """A crash leaves no trace of its own: an attempt that may follow one is counted before
    it runs, so the count survives the next crash."""
    from durable_workflow.executor import workflow_task as module

    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "WORKFLOW_TASK_MAX_ATTEMPTS": 2}

    def dies(*args, **kwargs):
        raise Died

    monkeypatch.setattr(module, "_advance_and_settle", dies)
    stub = start("tests.sequential", "poison-crash", "ada")
    task = workflow_task(stub)
    deaths = 0
    for delivery in range(6):
        try:
            outcome = executor.run_workflow_task(task.id, redelivered=delivery > 0)
        except Died:
            deaths += 1
            continue
        break
    task.refresh_from_db()
    # The first death left nothing; the next two were counted first; the fourth delivery
    # found two counted attempts that never finished.
    assert (deaths, outcome, task.status, task.attempt_count) == (3, "failed", "failed", 2)
    (row,) = failures(stub)
    assert row.exception_class == "durable_workflow.exceptions.WorkflowTaskAttemptsExceeded"
    assert "2 times" in row.message and row.details["task_failure_reason"] == "repeated_attempts"


def test_an_attempt_counted_first_and_completed_is_just_a_completed_task(inline):
    stub = start("tests.sequential", "poison-fine", "ada")
    task = workflow_task(stub)
    assert executor.run_workflow_task(task.id, redelivered=True) == "completed"
    task.refresh_from_db()
    assert (task.status, task.attempt_count) == ("completed", 1)  # one attempt, counted once


def test_only_an_attempt_that_may_follow_a_lost_one_is_counted_first(inline):
    """A first delivery costs no extra transaction."""
    from durable_workflow.executor import poison

    stub = start("tests.sequential", "poison-cheap", "ada")
    task = workflow_task(stub)
    from durable_workflow.store import tasks as store

    record = store.get(task.id)
    assert not poison.needs_mark(record, poison.Attempt(task.id))
    assert poison.needs_mark(record, poison.Attempt(task.id, redelivered=True))


@pytest.mark.parametrize("kind", ["interrupt", "exit"])
def test_an_interrupted_body_fails_nothing_and_runs_again(inline, monkeypatch, kind):
    monkeypatch.setitem(hostile.INTERRUPT_BODY, "armed", True)
    stub = start("tests.interrupted-once", f"interrupted-body-{kind}", kind)
    task = workflow_task(stub)
    with pytest.raises(KeyboardInterrupt if kind == "interrupt" else SystemExit):
        executor.run_workflow_task(task.id, redelivered=True)  # counted first, taken back
    task.refresh_from_db()
    assert (task.status, task.attempt_count) == ("ready", 0)
    assert failures(stub) == [] and stub.refresh().status() == "pending"
    inline.run()
    assert stub.refresh().output() == "5"


@pytest.mark.parametrize("kind", ["interrupt", "exit"])
def test_an_interrupted_activity_is_handed_back_uncounted(inline, kind):
    stub = start("tests.interrupted-activity", f"interrupted-activity-{kind}", kind)
    executor.run_workflow_task(workflow_task(stub).id)
    activity = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    with pytest.raises(KeyboardInterrupt if kind == "interrupt" else SystemExit):
        executor.run_activity_task(activity.id)
    activity.refresh_from_db()
    assert activity.status == "ready"  # at once, not when its lease runs out
    (attempt,) = ActivityAttempt.objects.filter(execution__run_id=stub.run_id())
    assert attempt.status == "cancelled"  # not "expired": no worker was lost
    assert failures(stub) == []
    inline.run()
    assert stub.refresh().output() == "done on attempt 2"
    assert "ActivityFailed" not in event_types(stub)
    assert "ActivityRetryScheduled" not in event_types(stub)


def test_another_base_exception_in_an_activity_is_an_activity_failure(inline):
    """Not a lost lease: recorded at once, and the retry policy applies."""
    stub = start("tests.interrupted-activity", "halted-activity", "other")
    inline.run()
    assert stub.refresh().output() == "done on attempt 2"
    (retry,) = [e.payload for e in stub.history() if e.event_type == "ActivityRetryScheduled"]
    assert retry["exception_type"] == "tests.testapp.hostile.Halt"
    statuses = list(
        ActivityAttempt.objects.filter(execution__run_id=stub.run_id())
        .order_by("attempt_number")
        .values_list("status", flat=True)
    )
    assert statuses == ["failed", "completed"]
    assert Invocation.objects.filter(name="interrupted").count() == 2
