"""``WorkflowStub.describe()`` and ``wait()``: what a run waits on, and a parked run."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from durable_workflow import WorkflowDescription, WorkflowParkedError, WorkflowStub, clock
from durable_workflow.description import (
    ActivityWait,
    ChildWait,
    ConditionWait,
    SignalWait,
    TimerWait,
    UpdateWait,
)
from durable_workflow.exceptions import DurableWorkflowError
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_a_reserved_instance_waits_on_nothing():
    described = WorkflowStub.make("tests.sleeper", "desc-reserved").describe()
    assert described == WorkflowDescription(
        instance_id="desc-reserved",
        workflow_type="tests.sleeper",
        run_id=None,
        run_number=None,
        status="reserved",
        closed_reason=None,
    )
    assert not described.parked


def test_a_timer_wait_says_until_when(inline):
    clock.freeze(T0)
    stub = start("tests.sleeper", "desc-timer", 90)
    inline.run()
    described = stub.describe()
    assert described.status == "waiting"
    assert described.waiting_on == (TimerWait(sequence=1, fire_at=T0 + dt.timedelta(seconds=90)),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        described.status = "completed"  # type: ignore[misc]


def test_signal_and_condition_waits_name_their_key_and_timeout(inline):
    clock.freeze(T0)
    signal = start("tests.approval", "desc-signal", "signal-timeout", 30)
    condition = start("tests.approval", "desc-condition", "condition", 45)
    inline.run()
    assert signal.describe().waiting_on == (
        SignalWait(sequence=1, signal_name="approved-by", timeout_at=T0 + dt.timedelta(seconds=30)),
    )
    assert condition.describe().waiting_on == (
        ConditionWait(
            sequence=1, condition_key="approval.ready", timeout_at=T0 + dt.timedelta(seconds=45)
        ),
    )
    signal.signal("approved-by", "ada")
    inline.run()
    assert signal.describe().waiting_on == ()
    assert signal.describe().status == "completed"


def test_an_activity_wait_gives_its_attempt_and_next_retry(inline):
    from durable_workflow import executor
    from durable_workflow.models import Task

    clock.freeze(T0)
    stub = start("tests.retrying", "desc-activity", 99)
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id()).id)
    (waiting,) = stub.describe().waiting_on
    assert isinstance(waiting, ActivityWait)
    assert (waiting.activity_type, waiting.status, waiting.attempt) == ("tests.flaky", "pending", 0)
    assert waiting.next_attempt_at is None
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    executor.run_activity_task(task.id)  # attempt 1 fails; the retry waits for its back-off
    (waiting,) = stub.describe().waiting_on
    assert (waiting.attempt, waiting.status) == (1, "pending")
    assert waiting.next_attempt_at == T0  # backoff [0]


def test_a_child_wait_names_the_child(inline):
    stub = start("tests.parent", "desc-parent", "cancelled")
    from durable_workflow import executor
    from durable_workflow.models import Task

    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id()).id)
    (waiting,) = stub.describe().waiting_on
    assert isinstance(waiting, ChildWait)
    assert waiting.child_workflow_type == "tests.child-echo"
    assert waiting.sequence == 1


def test_an_accepted_update_is_listed_until_it_completes(inline):
    stub = start("tests.approval", "desc-update", "updates")
    inline.run()
    submitted = stub.submit_update("add-item", "one")
    kinds = [w.kind for w in stub.describe().waiting_on]
    assert kinds == ["condition", "update"]
    update = stub.describe().waiting_on[-1]
    assert isinstance(update, UpdateWait)
    assert (update.update_id, update.update_name) == (submitted.update_id, "add-item")
    inline.run()
    assert [w.kind for w in stub.describe().waiting_on] == ["condition"]


def test_a_parked_run_describes_its_task_failure_and_wait_raises(inline):
    clock.freeze(T0)
    stub = start("tests.touches-orm", "desc-parked")
    inline.run()
    described = stub.describe()
    assert described.status == "pending" and described.parked
    failure = described.task_failure
    assert failure is not None
    assert failure.exception_type == "durable_workflow.exceptions.WorkflowOrmAccessError"
    assert "Invocation" in failure.message or "database" in failure.message
    assert "Traceback" in failure.traceback
    assert failure.since == T0
    with pytest.raises(WorkflowParkedError) as raised:
        stub.wait(timeout=30)
    error = raised.value
    assert isinstance(error, DurableWorkflowError)
    assert (error.exception_type, error.message, error.traceback, error.since) == (
        failure.exception_type,
        failure.message,
        failure.traceback,
        failure.since,
    )
    assert error.run_id == stub.run_id()


def test_wait_returns_a_closed_run_and_a_closed_run_is_not_parked(inline):
    stub = start("tests.sequential", "desc-done", "ada")
    inline.run()
    assert stub.wait(timeout=1).completed()
    described = stub.describe()
    assert (described.status, described.waiting_on, described.task_failure) == (
        "completed",
        (),
        None,
    )
