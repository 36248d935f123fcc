"""Fake mode: what runs inline and when, mocks, retries, durability, restoring."""

from __future__ import annotations

import pytest
from django.db import transaction

from durable_workflow import WorkflowStub, clock
from durable_workflow.executor import dispatch, hooks
from durable_workflow.models import ActivityAttempt, ActivityExecution, Task, Timer
from durable_workflow.testing import LogicError, WorkflowFake, travel
from durable_workflow.testing.fake import FakeBackend
from tests.testapp.testing_workflows import (
    ApprovalWorkflow,
    Charge,
    ChargeWorkflow,
    GreetingActivity,
    MyActivity,
    MyTimerWorkflow,
    SlowRetry,
    SlowRetryWorkflow,
)


class PaymentDeclined(Exception):
    pass


def _event_types(stub):
    return [event.event_type for event in stub.history()]


def test_real_activities_run_when_not_mocked(workflow_fake):
    stub = WorkflowStub.make("kit.nap-then-greet", "nap-1")
    stub.start(0, "Ada")
    assert stub.status() == "completed"  # refreshed by the command itself
    assert stub.output() == "Hello, Ada!"


def test_constant_mock_and_type_key_mock(workflow_fake):
    WorkflowStub.mock("kit.greeting", "bonjour")
    stub = WorkflowStub.make(ApprovalWorkflow, "const-1")
    stub.start()
    stub.signal("name-provided", "Ada")
    assert stub.output() == {"name": "Ada", "greeting": "bonjour"}


def test_a_mock_can_fail_until_a_retry_succeeds(workflow_fake):
    attempts = []

    def flaky(context, amount):
        attempts.append((context.attempt_count(), context.activity_id(), context.attempt_id()))
        if context.attempt_count() < 3:
            raise PaymentDeclined(f"declined {amount}")
        return f"charged {amount} on attempt {context.attempt_count()}"

    WorkflowStub.mock(Charge, flaky)
    stub = WorkflowStub.make(ChargeWorkflow, "retry-1")
    stub.start([10])

    assert stub.output() == ["charged 10 on attempt 3"]
    assert [a[0] for a in attempts] == [1, 2, 3]
    assert len({a[1] for a in attempts}) == 1  # one execution id across retries
    assert len({a[2] for a in attempts}) == 3  # a new attempt id each time
    assert _event_types(stub).count("ActivityRetryScheduled") == 2
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert ActivityAttempt.objects.filter(execution=execution).count() == 3
    WorkflowStub.assert_dispatched_times(Charge, 1)  # a retried call is one dispatch


def test_a_mock_that_always_raises_fails_the_activity(workflow_fake):
    WorkflowStub.mock(Charge, PaymentDeclined("card refused"))
    stub = WorkflowStub.make(ChargeWorkflow, "retry-2")
    stub.start([10, 20])
    assert stub.output() == ["PaymentDeclined: card refused", "PaymentDeclined: card refused"]
    assert _event_types(stub).count("ActivityFailed") == 2
    assert ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).count() == 6


def test_a_retry_with_back_off_waits_for_the_clock(workflow_fake):
    # Frozen: "29 s later" must not become 30 when a real second passes during the test
    # (it ran the retry early on a loaded machine).
    clock.freeze()
    calls = []

    def once_failing(context):
        calls.append(context.attempt_count())
        if context.attempt_count() == 1:
            raise PaymentDeclined("try again later")
        return "second time lucky"

    WorkflowStub.mock(SlowRetry, once_failing)
    stub = WorkflowStub.make(SlowRetryWorkflow, "slow-1")
    stub.start()
    assert stub.status() == "waiting" and calls == [1]
    retry = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    assert retry.payload["retry_backoff_seconds"] == 30

    travel(seconds=29)
    assert WorkflowStub.run_ready_tasks() == 0
    travel(seconds=1)
    assert WorkflowStub.run_ready_tasks() == 2  # the retry, then the workflow task
    assert stub.refresh().output() == "second time lucky"


def test_child_workflows_run_as_real_nested_runs(workflow_fake):
    WorkflowStub.mock("tests.add", 100)  # mocks reach the child's activities too
    parent = WorkflowStub.make("tests.parent", "parent-1")
    parent.start("simple")
    output = parent.output()
    assert output["result"] == {"echo": 100}
    child = WorkflowStub.load(output["child_id"])
    assert child.completed() and child.run_id() == output["run"] != parent.run_id()
    assert "ActivityCompleted" in _event_types(child)
    assert {"ChildWorkflowScheduled", "ChildRunCompleted"} <= set(_event_types(parent))
    WorkflowStub.assert_dispatched("tests.add", lambda a, b: (a, b) == (41, 1))


def test_timers_stay_durable_rows_until_due(workflow_fake):
    stub = WorkflowStub.make(MyTimerWorkflow, "durable-timer")
    stub.start()
    timer = Timer.objects.get(run_id=stub.run_id())
    assert timer.status == "pending"
    task = Task.objects.get(run_id=stub.run_id(), task_type="timer")
    assert task.status == "ready" and task.available_at == timer.fire_at

    with travel(seconds=59):
        assert WorkflowStub.run_ready_tasks() == 0
    assert Timer.objects.get(id=timer.id).status == "pending"
    with travel(minutes=1):
        assert WorkflowStub.run_ready_tasks() == 2
    assert Timer.objects.get(id=timer.id).status == "fired"
    assert stub.refresh().output() == {"done": True}


def test_travel_alone_runs_nothing(workflow_fake):
    stub = WorkflowStub.make(MyTimerWorkflow, "travel-only")
    stub.start()
    travel(hours=1)
    assert stub.refresh().status() == "waiting"
    assert WorkflowStub.run_ready_tasks() == 2
    assert stub.refresh().completed()


def test_wait_returns_at_once_in_fake_mode(workflow_fake):
    stub = WorkflowStub.make(MyTimerWorkflow, "wait-1")
    stub.start()
    assert stub.wait(timeout=30).status() == "waiting"


def test_cancel_runs_inline(workflow_fake):
    stub = WorkflowStub.make(MyTimerWorkflow, "cancel-1")
    stub.start()
    stub.cancel("no longer needed")
    assert stub.status() == "cancelled"
    assert _event_types(stub)[-1] == "WorkflowCancelled"


def test_update_is_applied_before_attempt_update_returns(workflow_fake):
    stub = WorkflowStub.make("tests.approval", "update-stuck")
    stub.start("updates")
    result = stub.attempt_update("add-item", "a")
    assert result.completed and result.result == 1


def test_mock_needs_fake_mode():
    WorkflowStub.restore()
    with pytest.raises(LogicError, match=r"call WorkflowStub.fake\(\) first"):
        WorkflowStub.mock(MyActivity, "x")


def test_mock_rejects_anything_but_activities(workflow_fake):
    with pytest.raises(TypeError, match="expected an Activity subclass"):
        WorkflowStub.mock(42, "x")
    WorkflowStub.mock("not-registered.anywhere", "fine")  # unresolved keys are accepted
    assert "not-registered.anywhere" in hooks.activity_mocks


def test_restore_puts_everything_back(inline):
    before = dispatch.backend()
    hooks.activity_mocks["kept"] = "from before"
    with WorkflowStub.fake() as fake:
        assert isinstance(fake, WorkflowFake)
        assert WorkflowStub.is_fake()
        assert isinstance(dispatch.backend(), FakeBackend)
        WorkflowStub.mock(GreetingActivity, "mocked")
        assert set(hooks.activity_mocks) == {"kit.greeting"}
    assert not WorkflowStub.is_fake()
    assert dispatch.backend() is before
    assert hooks.activity_mocks == {"kept": "from before"}
    hooks.activity_mocks.clear()
    with pytest.raises(LogicError, match="was restored"):
        fake.mock(GreetingActivity, "late")


def test_plain_call_and_restore(inline):
    fake = WorkflowStub.fake()
    again = WorkflowStub.fake()  # a second call starts afresh
    assert not fake.active and again.active
    WorkflowStub.restore()
    WorkflowStub.restore()  # idempotent
    assert not again.active and dispatch.backend() is inline


@pytest.mark.django_db(transaction=True)
def test_commands_inside_an_application_transaction_run_on_commit(inline):
    with WorkflowStub.fake():
        WorkflowStub.mock(MyActivity, "later")
        with transaction.atomic():
            stub = WorkflowStub.make("kit.my-workflow", "atomic-1")
            stub.start()
            assert stub.refresh().status() == "pending"  # nothing runs before commit
        assert stub.refresh().completed()  # ran when the transaction committed


@pytest.mark.django_db
def test_inside_a_test_transaction_an_application_transaction_needs_run_ready_tasks(inline):
    with WorkflowStub.fake():
        WorkflowStub.mock(MyActivity, "later")
        with transaction.atomic():
            stub = WorkflowStub.make("kit.my-workflow", "atomic-2")
            stub.start()
        assert stub.refresh().status() == "pending"  # the test's transaction never commits
        WorkflowStub.run_ready_tasks()
        assert stub.refresh().completed()


def test_errors_in_inline_tasks_reach_the_test(workflow_fake, monkeypatch):
    from durable_workflow.testing import inline

    def broken(task):
        raise RuntimeError("executor exploded")

    monkeypatch.setattr(inline, "run_task", broken)
    stub = WorkflowStub.make(MyTimerWorkflow, "broken-1")
    with pytest.raises(RuntimeError, match="executor exploded"):
        stub.start()
    monkeypatch.undo()
    WorkflowStub.run_ready_tasks()  # the pending error was raised once, not twice
    assert stub.refresh().completed() is False and stub.status() == "waiting"


@pytest.mark.django_db
def test_dispatches_before_fake_mode_do_not_count(inline):
    earlier = WorkflowStub.make("tests.sequential", "before-fake")
    earlier.start("Ada")
    inline.run()
    assert earlier.refresh().completed()
    with WorkflowStub.fake() as fake:
        WorkflowStub.assert_nothing_dispatched()
        WorkflowStub.mock("tests.greet", "hi")
        WorkflowStub.make("tests.sequential", "in-fake").start("Bo")
        WorkflowStub.assert_dispatched_times("tests.greet", 1)
        WorkflowStub.assert_dispatched("tests.greet", lambda name: name == "Bo")
        fake.forget_dispatches()
        WorkflowStub.assert_nothing_dispatched()


def test_with_eager_execution_on_activities_are_still_dispatched(workflow_fake):
    """Eager activities skip the broker in a worker; the fake mode's assertions count
    dispatched activities, so there every activity is dispatched as before."""
    from django.conf import settings
    from django.test import override_settings

    from tests.testapp.workflows import Add, Greet

    engine = {**settings.DURABLE_WORKFLOW, "EAGER_ACTIVITIES": True, "EAGER_WORKFLOW_TASKS": True}
    with override_settings(DURABLE_WORKFLOW=engine):
        WorkflowStub.mock(Greet, "hi")
        WorkflowStub.mock(Add, 3)
        stub = WorkflowStub.make("tests.sequential", "eager-fake")
        stub.start("Ada")
        assert stub.refresh().output() == ["hi", 3]
        WorkflowStub.assert_dispatched(Greet)
        WorkflowStub.assert_dispatched_times(Add, 1)
