"""Asynchronous activity completion: ``raise dw.CompleteAsync()``, then the task token."""

from __future__ import annotations

import pytest

import durable_workflow as dw
from durable_workflow import ActivityCompletionRejected, WorkflowStub
from durable_workflow.executor.repair import repair_pass
from durable_workflow.models import ActivityAttempt, Task
from durable_workflow.testing import travel
from tests.integration.helpers import event_types, events_of
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def deferred(inline, instance_id: str, *args) -> tuple[WorkflowStub, str]:
    stub = WorkflowStub.make("tests.patterns.awaits-outside-work", instance_id)
    stub.start(instance_id, *args)
    inline.run()
    token = Invocation.objects.filter(name=f"deferred:{instance_id}").latest("id").key
    return stub, token


def refused(report, reason: str) -> None:
    with pytest.raises(ActivityCompletionRejected) as caught:
        report()
    assert caught.value.reason == reason


def test_complete_later_from_elsewhere(inline):
    stub, token = deferred(inline, "async-1")
    assert stub.refresh().status() == "waiting"
    [attempt] = ActivityAttempt.objects.all()
    assert attempt.status == "running"
    assert not Task.objects.filter(task_type="activity", status="leased").exists()  # no lease
    handle = dw.activity_completion(token)
    handle.heartbeat({"message": "waiting for a human"})
    handle.complete({"approved": True})
    inline.run()
    assert stub.refresh().output() == {"approved": True}
    [completed] = events_of(stub, "ActivityCompleted")
    assert completed["reported_by"] == "task_token"
    assert "ActivityHeartbeatRecorded" in event_types(stub)
    refused(lambda: handle.complete("twice"), "activity_closed")  # a duplicate
    refused(lambda: handle.heartbeat(), "activity_closed")


def test_fail_through_the_token_follows_the_retry_policy(inline):
    stub, token = deferred(inline, "async-2", None, 2)
    dw.activity_completion(token).fail(ValueError("out of stock"))
    inline.run()  # no retry yet: the back-off is one second
    refused(lambda: dw.activity_completion(token).complete("late"), "attempt_superseded")
    with travel(seconds=2):
        inline.run()
        second = Invocation.objects.filter(name="deferred:async-2").latest("id")
        assert second.attempt == 2 and second.key != token
        dw.activity_completion(second.key).fail(dw.NonRetryableError("gone"))
        inline.run()
    out = stub.refresh().output()
    assert out["failed"] == "gone"


def test_a_timed_out_attempt_refuses_its_token(inline):
    stub, token = deferred(inline, "async-3", 30)
    with travel(seconds=31):
        repair_pass()  # the watchdog enforces start-to-close
        inline.run()
    assert stub.refresh().output()["type"] == "ActivityTimedOut"
    refused(lambda: dw.activity_completion(token).complete("too late"), "activity_closed")


def test_forged_and_hostile_tokens_are_refused():
    for token in ("", "x" * 10_000, "abc:def:ghi", "nul\x00", "\ud800"):
        refused(lambda token=token: dw.activity_completion(token).complete(1), "invalid_token")


def test_cancelled_workflow_tells_the_holder(inline):
    stub, token = deferred(inline, "async-5")
    stub.cancel("changed my mind")
    handle = dw.activity_completion(token)
    with pytest.raises(ActivityCompletionRejected) as caught:
        handle.heartbeat()
    assert caught.value.reason == "cancel_requested"
    assert caught.value.metadata["cancel_requested"] is True
    handle.report_cancellation()
    inline.run()
    assert stub.refresh().status() == "cancelled"
    refused(lambda: handle.complete("after all"), "activity_closed")


def test_the_token_can_complete_before_the_activity_hands_over(inline):
    """Reported while handle() still runs: the worker's hand-over then writes nothing."""
    stub, _ = deferred(inline, "self-async-6")
    assert stub.refresh().output() == "fast"
    [attempt] = ActivityAttempt.objects.all()
    assert attempt.status == "completed"
    assert Task.objects.get(task_type="activity").status == "completed"
    assert event_types(stub).count("ActivityCompleted") == 1
