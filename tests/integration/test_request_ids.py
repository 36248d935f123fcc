"""Issue 23, item 9: a command repeated under the same request id (a client retrying
after a lost answer) returns the first outcome instead of acting twice."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from durable_workflow import InvalidValueError, StartOptions, WorkflowStub
from durable_workflow.models import (
    Task,
    WorkflowCommand,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)
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


# -------------------------------------- repair, signal/update-with-start, shorthands
def test_a_retried_signal_with_start_neither_starts_nor_signals_twice(inline):
    stub = WorkflowStub.make("tests.approval", "req-sws")
    first = stub.signal_with_start("approved-by", "Grace", start_args=["signal"], request_id="s")
    again = stub.signal_with_start("approved-by", "Grace", start_args=["signal"], request_id="s")
    assert first.start.outcome == "started_new" and first.signal.accepted
    assert again == first
    assert WorkflowRun.objects.filter(instance_id="req-sws").count() == 1
    assert WorkflowSignal.objects.filter(instance_id="req-sws").count() == 1
    inline.run()
    assert stub.refresh().output() == "Grace"
    # the run is closed: without the id this would start a second run; with it, nothing
    late = stub.signal_with_start("approved-by", "Grace", start_args=["signal"], request_id="s")
    assert late == first
    assert WorkflowRun.objects.filter(instance_id="req-sws").count() == 1
    assert event_types(stub).count("SignalReceived") == 1
    # a plain signal under the same id is the same request: its first outcome
    assert stub.attempt_signal("approved-by", "x", request_id="s") == first.signal


def test_a_rejected_signal_with_start_answers_the_same_rejection(inline):
    stub = WorkflowStub.make("tests.approval", "req-sws-bad")
    first = stub.signal_with_start("nope", start_args=["signal"], request_id="s")
    again = stub.signal_with_start("nope", start_args=["signal"], request_id="s")
    assert first.start is None and first.signal.outcome == "rejected_unknown_signal"
    assert again == first
    assert WorkflowCommand.objects.filter(instance_id="req-sws-bad").count() == 1
    assert not WorkflowRun.objects.filter(instance_id="req-sws-bad").exists()


def test_a_retried_update_with_start_neither_starts_nor_submits_twice(inline):
    stub = WorkflowStub.make("tests.approval", "req-uws")
    first = stub.submit_update_with_start("add-item", "a", start_args=["updates"], request_id="u")
    again = stub.submit_update_with_start("add-item", "a", start_args=["updates"], request_id="u")
    assert first.start.outcome == "started_new" and first.update.accepted
    assert again == first
    assert WorkflowUpdate.objects.filter(instance_id="req-uws").count() == 1
    inline.run()
    done = stub.attempt_update_with_start(
        "add-item", "a", start_args=["updates"], wait_timeout=0, request_id="u"
    )
    assert done.update.update_id == first.update.update_id and done.update.result == 1
    assert done.start == first.start
    assert stub.update_with_start("add-item", "a", wait_timeout=0, request_id="u") == 1
    assert stub.query("snapshot")["items"] == ["a"]
    assert WorkflowRun.objects.filter(instance_id="req-uws").count() == 1


def test_a_refused_update_with_start_is_refused_once(inline):
    stub = start("tests.approval", "req-uws-dup", "updates")
    refuse = StartOptions.reject_duplicate()
    first = stub.attempt_update_with_start("add-item", "a", options=refuse, request_id="d")
    again = stub.attempt_update_with_start("add-item", "a", options=refuse, request_id="d")
    assert first.update is None and first.start.outcome == "rejected_duplicate"
    assert again == first
    starts = WorkflowCommand.objects.filter(instance_id="req-uws-dup", command_type="start")
    assert starts.count() == 2  # the plain start, then the one refused start


def test_a_repair_sent_twice_repairs_once(inline):
    stub = start("tests.approval", "req-repair", "signal")
    inline.run()
    Task.objects.filter(run_id=stub.run_id()).delete()
    first = stub.repair(reason="lost", request_id="p")
    assert first.outcome == "repair_dispatched"
    Task.objects.filter(run_id=stub.run_id()).delete()  # lost again: only a new id repairs
    again = stub.repair(reason="lost", request_id="p")
    assert again == first
    assert not Task.objects.filter(run_id=stub.run_id()).exists()
    assert (
        WorkflowCommand.objects.filter(instance_id="req-repair", command_type="repair").count() == 1
    )
    assert stub.repair(request_id="p2").outcome == "repair_dispatched"
    with pytest.raises(InvalidValueError):
        stub.repair(request_id="bad\x00id")


def test_the_shorthand_calls_take_a_request_id(inline):
    stub = start("tests.approval", "req-short", "updates")
    inline.run()
    sent = stub.attempt_signal("ping", request_id="a")
    assert stub.attempt_signal("ping", request_id="a") == sent
    submitted = stub.submit_update("add-item", "a", request_id="b")
    assert stub.attempt_update("add-item", "a", wait_timeout=0, request_id="b").update_id == (
        submitted.update_id
    )
    assert WorkflowSignal.objects.filter(instance_id="req-short").count() == 1
    assert WorkflowUpdate.objects.filter(instance_id="req-short").count() == 1


def test_the_awaitable_twins_pass_the_request_id_on(inline):
    stub = WorkflowStub.make("tests.approval", "req-async")

    async def scenario() -> tuple[Any, ...]:
        # async_to_sync keeps this thread the thread-sensitive one (the test's connection)
        sws = ("approved-by", "A")
        one = await stub.asignal_with_start(*sws, start_args=["signal"], request_id="x")
        two = await stub.asignal_with_start(*sws, start_args=["signal"], request_id="x")
        repaired = await stub.arepair(request_id="r")
        return one, two, repaired, await stub.arepair(request_id="r")

    one, two, repaired, again = async_to_sync(scenario)()
    assert one == two and WorkflowSignal.objects.filter(instance_id="req-async").count() == 1
    assert repaired == again


def test_webhook_signal_and_update_with_start_and_repair_take_the_header(client, inline, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    sws = "/webhooks/start/order-workflow/signals/approved-by"
    body = {"workflow_id": "req-hook-sws", "order_id": 1, "signal_arguments": ["Ada"]}
    first = post(client, sws, body, **{"X-Request-Id": "h-1"})
    again = post(client, sws, body, **{"X-Request-Id": "h-1"})
    assert first.status_code == again.status_code == 202
    assert again.json()["command_id"] == first.json()["command_id"]
    assert again.json()["start_command_id"] == first.json()["start_command_id"]
    assert again.json()["start_outcome"] == "started_new"
    assert WorkflowSignal.objects.filter(instance_id="req-hook-sws").count() == 1
    assert WorkflowRun.objects.filter(instance_id="req-hook-sws").count() == 1

    uws = "/webhooks/start/order-workflow/updates/mark-ready"
    update = {"workflow_id": "req-hook-uws", "order_id": 1, "update_arguments": [True]}
    update["wait_for"] = "accepted"
    sent = post(client, uws, update, **{"X-Request-Id": "h-2"})
    resent = post(client, uws, update, **{"X-Request-Id": "h-2"})
    assert sent.json()["update_id"] is not None, sent.json()
    assert resent.json()["update_id"] == sent.json()["update_id"]
    assert resent.json()["start_command_id"] == sent.json()["start_command_id"]
    assert WorkflowUpdate.objects.filter(instance_id="req-hook-uws").count() == 1

    inline.run()
    repair = "/webhooks/instances/req-hook-sws/repair"
    one = post(client, repair, {"reason": "r"}, **{"X-Request-Id": "h-3"})
    two = post(client, repair, {"reason": "r"}, **{"X-Request-Id": "h-3"})
    assert one.json()["command_id"] == two.json()["command_id"], one.json()
    assert post(client, sws, body, **{"X-Request-Id": "bad\x7fid"}).status_code == 422


def test_a_retried_reset_or_fork_rewinds_once(inline):
    stub = start("tests.approval", "req-reset", "updates")
    inline.run()
    old_run = stub.run_id()
    first = stub.reset("start", reason="retry me", request_id="rs")
    assert first.terminated_old_run and stub.run_id() == first.run_id
    # the stub follows the new run; a retry of the same request names the old one
    again = WorkflowStub.load_run(old_run).reset("start", reason="retry me", request_id="rs")
    assert again == first
    assert WorkflowRun.objects.filter(instance_id="req-reset").count() == 2
    assert (
        WorkflowCommand.objects.filter(instance_id="req-reset", command_type="reset").count() == 1
    )
    # a dry run records nothing and is never matched
    assert stub.reset("start", dry_run=True, request_id="rs").dry_run

    fork = stub.fork("start", new_instance_id="req-fork", request_id="fk")
    refork = stub.fork("start", new_instance_id="req-fork", request_id="fk")
    assert refork == fork and fork.kind == "fork"
    assert WorkflowRun.objects.filter(instance_id="req-fork").count() == 1
    with pytest.raises(InvalidValueError):
        stub.fork("start", new_instance_id="req-fork-2", request_id="x" * 256)
    assert not WorkflowRun.objects.filter(instance_id="req-fork-2").exists()


def test_racing_deliveries_of_one_request_start_and_signal_once(inline):
    """Four deliveries of one signal-with-start at once (a client and its retries):
    the instance lock queues them, one starts and signals, the others get its answer."""
    barrier = threading.Barrier(4)
    results: list[Any] = []
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            barrier.wait()
            stub = WorkflowStub.make("tests.approval", "req-race")
            sws = ("approved-by", "Grace")
            results.append(stub.signal_with_start(*sws, start_args=["signal"], request_id="rr"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 4 and all(result == results[0] for result in results)
    assert WorkflowRun.objects.filter(instance_id="req-race").count() == 1
    assert WorkflowSignal.objects.filter(instance_id="req-race").count() == 1


def test_a_webhook_repair_of_a_historical_run_is_refused_once(client, inline, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    started = post(client, "/webhooks/start/webhooks.looper", {"workflow_id": "req-loop"})
    assert started.status_code == 202
    inline.run()
    old = WorkflowRun.objects.get(instance_id="req-loop", run_number=1)
    url = f"/webhooks/instances/req-loop/runs/{old.id}/repair"
    first = post(client, url, {"reason": "r"}, **{"X-Request-Id": "hr"})
    again = post(client, url, {"reason": "r"}, **{"X-Request-Id": "hr"})
    assert first.status_code == again.status_code == 409, first.json()
    assert first.json()["outcome"] == "rejected_not_current"
    assert again.json()["command_id"] == first.json()["command_id"]
    repairs = WorkflowCommand.objects.filter(instance_id="req-loop", command_type="repair")
    assert repairs.count() == 1
