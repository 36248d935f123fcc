"""Cancel (cooperative) and terminate (immediate)."""

from __future__ import annotations

import pytest

from durable_workflow import CommandRejected, WorkflowStub
from durable_workflow.executor import activity_task, settlement
from durable_workflow.models import ActivityExecution, Task, Timer, WorkflowFailure
from tests.integration.helpers import event_types, events_of, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_a_workflow_waiting_on_a_timer(inline):
    stub = start("tests.cancellable", "cancel-1", "timer")
    inline.run()
    result = stub.cancel("customer asked")
    assert result.accepted and result.outcome == "cancelled"
    assert result.reason == "customer asked"
    inline.run()
    stub.refresh()
    assert stub.status() == "cancelled" and stub.closed_reason() == "cancelled"
    assert not stub.running()
    types = event_types(stub)
    assert types[-3:] == ["CancelRequested", "TimerCancelled", "WorkflowCancelled"]
    final = events_of(stub, "WorkflowCancelled")[0]
    assert final["failure_category"] == "cancelled" and final["reason"] == "customer asked"
    failure = WorkflowFailure.objects.get(id=final["failure_id"])
    assert failure.failure_category == "cancelled"
    assert Timer.objects.get(run_id=stub.run_id()).status == "cancelled"
    assert not Task.objects.filter(run_id=stub.run_id(), status__in=["ready", "leased"]).exists()


def test_the_body_can_clean_up_before_the_run_closes(inline):
    stub = start("tests.cancellable", "cancel-2", "cleanup")
    inline.run()
    stub.cancel()
    inline.run()
    stub.refresh()
    assert stub.status() == "cancelled"
    assert Invocation.objects.filter(name="greet").count() == 1  # the cleanup activity ran
    types = event_types(stub)
    assert types.index("CancelRequested") < types.index("ActivityScheduled")
    assert types[-1] == "WorkflowCancelled"


def test_a_body_that_swallows_the_cancel_still_ends_cancelled(inline):
    stub = start("tests.cancellable", "cancel-3", "swallow")
    inline.run()
    stub.cancel()
    inline.run()
    assert stub.refresh().status() == "cancelled"


def test_cancel_reaches_a_running_activity_through_its_heartbeat(inline):
    stub = start("tests.cancellable", "cancel-4", "activity")
    from durable_workflow import executor

    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    lease = activity_task._claim(task.id)
    stub.cancel("stop it")
    ok, value = activity_task._invoke(lease)  # the first heartbeat raises ActivityCancelled
    assert not ok
    assert Invocation.objects.filter(name="saw-cancel").count() == 1
    assert settlement.settle(lease, ok, value) == "cancelled"
    inline.run()
    stub.refresh()
    assert stub.status() == "cancelled"
    assert "ActivityCancelled" in event_types(stub)
    assert ActivityExecution.objects.get(run_id=stub.run_id()).status == "cancelled"


def test_terminate_is_immediate_and_cancels_open_work(inline):
    stub = start("tests.cancellable", "term-1", "activity")
    from durable_workflow import executor

    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    lease = activity_task._claim(task.id)
    result = stub.terminate("stuck")
    assert result.outcome == "terminated"
    stub.refresh()
    assert stub.status() == "terminated" and stub.closed_reason() == "terminated"
    assert event_types(stub)[-3:] == [
        "TerminateRequested",
        "ActivityCancelled",
        "WorkflowTerminated",
    ]
    failure = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert failure.failure_category == "terminated"
    assert failure.details["propagation_kind"] == "terminated"
    # the attempt that was running learns at its next heartbeat, and its report is stale
    ok, value = activity_task._invoke(lease)
    assert settlement.settle(lease, ok, value) == "stale"
    assert stub.refresh().status() == "terminated"
    assert "ActivityCompleted" not in event_types(stub)


def test_cancel_and_terminate_rejections(inline):
    reserved = WorkflowStub.make("tests.cancellable", "cancel-reserved")
    assert reserved.attempt_cancel().rejection_reason == "instance_not_started"
    stub = start("tests.cancellable", "cancel-closed", "timer")
    stub.terminate()
    rejected = stub.attempt_cancel()
    assert (rejected.outcome, rejected.rejection_reason) == (
        "rejected_not_active",
        "run_not_active",
    )
    with pytest.raises(CommandRejected):
        stub.terminate()


def test_timer_task_after_cancel_is_a_no_op(inline):
    import datetime as dt

    from durable_workflow import clock

    stub = start("tests.cancellable", "cancel-late-timer", "timer")
    inline.run()
    stub.terminate()
    clock.advance(dt.timedelta(hours=2))
    inline.run()
    assert stub.refresh().status() == "terminated"
    assert "TimerFired" not in event_types(stub)
