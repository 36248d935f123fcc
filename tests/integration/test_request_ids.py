"""Issue 23, item 9: a command repeated under the same request id (a client retrying
after a lost answer) returns the first outcome instead of acting twice."""

from __future__ import annotations

import pytest

from durable_workflow import InvalidValueError
from durable_workflow.models import WorkflowCommand, WorkflowSignal
from tests.integration.helpers import event_types, start
from tests.integration.test_webhooks import post, start_order

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_signal_sent_twice_with_one_request_id_is_recorded_once(inline):
    stub = start("tests.approval", "req-1", "updates")
    inline.run()
    first = stub.attempt_signal_with_arguments("ping", [], request_id="r-1")
    again = stub.attempt_signal_with_arguments("ping", [], request_id="r-1")
    other = stub.attempt_signal_with_arguments("ping", [], request_id="r-2")
    assert first.accepted and again == first
    assert other.accepted and other.command_id != first.command_id
    assert WorkflowSignal.objects.filter(instance_id="req-1").count() == 2
    assert event_types(stub).count("SignalReceived") == 2


def test_a_rejected_request_answers_the_same_rejection(inline):
    stub = start("tests.approval", "req-2", "updates")
    inline.run()
    first = stub.attempt_signal_with_arguments("nope", [], request_id="r-1")
    again = stub.attempt_signal_with_arguments("nope", [], request_id="r-1")
    assert first.rejected and again == first
    assert WorkflowCommand.objects.filter(instance_id="req-2", command_type="signal").count() == 1


def test_cancel_and_terminate_are_acted_on_once(inline):
    stub = start("tests.cancellable", "req-3", "timer")
    inline.run()
    first = stub.attempt_cancel("customer asked", request_id="c-1")
    again = stub.attempt_cancel("customer asked", request_id="c-1")
    assert first.accepted and again == first
    assert event_types(stub).count("CancelRequested") == 1
    other = start("tests.cancellable", "req-4", "timer")
    inline.run()
    ended = other.terminate("ops", request_id="t-1")
    # the run is closed now: without the id a second terminate would be rejected
    assert other.terminate("ops", request_id="t-1") == ended
    assert other.attempt_terminate("ops").rejected


def test_an_update_submitted_twice_is_applied_once(inline):
    stub = start("tests.approval", "req-6", "updates")
    inline.run()
    first = stub.attempt_update_with_arguments("add-item", ["a"], wait_timeout=0, request_id="u")
    again = stub.attempt_update_with_arguments("add-item", ["a"], wait_timeout=0, request_id="u")
    assert first.accepted and again.update_id == first.update_id
    inline.run()
    done = stub.attempt_update_with_arguments("add-item", ["a"], wait_timeout=0, request_id="u")
    assert done.update_id == first.update_id and done.completed and done.result == 1
    assert stub.query("snapshot")["items"] == ["a"]


def test_request_ids_are_checked(inline):
    stub = start("tests.cancellable", "req-5", "timer")
    with pytest.raises(InvalidValueError):
        stub.attempt_cancel(request_id="x" * 256)
    with pytest.raises(InvalidValueError):
        stub.attempt_cancel(request_id="bad\x00id")


def test_webhooks_take_the_x_request_id_header(client, inline, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    start_order(client, "req-hook", inline)
    url = "/webhooks/instances/req-hook/signals/approved-by"
    first = post(client, url, {"arguments": ["Taylor"]}, **{"X-Request-Id": "hook-1"})
    again = post(client, url, {"arguments": ["Taylor"]}, **{"X-Request-Id": "hook-1"})
    assert first.status_code == again.status_code == 202
    assert again.json()["command_id"] == first.json()["command_id"]
    assert WorkflowSignal.objects.filter(instance_id="req-hook").count() == 1
    update = "/webhooks/instances/req-hook/updates/mark-ready"
    sent = post(client, update, {"arguments": [True]}, **{"X-Request-Id": "hook-3"})
    resent = post(client, update, {"arguments": [True]}, **{"X-Request-Id": "hook-3"})
    assert sent.json()["update_id"] is not None, sent.json()
    assert sent.json()["update_id"] == resent.json()["update_id"]
    cancel = "/webhooks/instances/req-hook/cancel"
    one = post(client, cancel, {"reason": "r"}, **{"X-Request-Id": "hook-2"})
    two = post(client, cancel, {"reason": "r"}, **{"X-Request-Id": "hook-2"})
    assert one.json()["command_id"] == two.json()["command_id"]
    bad = post(client, cancel, {}, **{"X-Request-Id": "x" * 300})
    assert bad.status_code == 422
