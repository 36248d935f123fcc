"""Webhook routes of issue 21: activity completion by task token, update-with-start."""

from __future__ import annotations

import json

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.webhooks import sign
from tests.integration.helpers import events_of
from tests.integration.test_webhooks import post, worker_thread  # noqa: F401 (fixture)
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _open_webhooks(settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}


def deferred(inline, workflow: str, instance_id: str) -> tuple[WorkflowStub, str]:
    stub = WorkflowStub.make(workflow, instance_id)
    stub.start(instance_id, None, 2)
    inline.run()
    return stub, Invocation.objects.filter(name=f"deferred:{instance_id}").latest("id").key


def test_complete_fail_and_heartbeat_by_token(client, inline):
    stub, token = deferred(inline, "tests.patterns.exposed-outside-work", "wh-async-1")
    beat = post(
        client,
        "/webhooks/activities/heartbeat",
        {"task_token": token, "details": {"message": "half"}},
    )
    assert beat.status_code == 200 and beat.json()["outcome"] == "heartbeat_recorded"
    done = post(client, "/webhooks/activities/complete", {"task_token": token, "result": {"ok": 1}})
    assert done.status_code == 200, done.json()
    assert done.json()["workflow_id"] == "wh-async-1"
    inline.run()
    assert stub.refresh().output() == {"ok": 1}
    again = post(client, "/webhooks/activities/complete", {"task_token": token, "result": 2})
    assert again.status_code == 409
    assert again.json()["rejection_reason"] == "activity_closed"


def test_a_described_failure_follows_the_retry_policy(client, inline):
    stub, token = deferred(inline, "tests.patterns.exposed-outside-work", "wh-async-2")
    error = {"message": "card declined", "type": "billing.declined", "non_retryable": True}
    failed = post(client, "/webhooks/activities/fail", {"task_token": token, "error": error})
    assert failed.status_code == 200 and failed.json()["outcome"] == "activity_failed"
    inline.run()
    assert stub.refresh().output() == {"failed": "card declined", "type": "billing.declined"}
    [event] = events_of(stub, "ActivityFailed")
    assert event["reported_by"] == "task_token" and event["non_retryable"] is True


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"task_token": 7},
        {"task_token": "x", "surprise": 1},
        {"task_token": "x", "error": {"message": ""}},
        {"task_token": "x", "error": {"message": "m", "type": "bad\x00type"}},
    ],
)
def test_bad_requests_are_refused_before_anything_is_read(client, body):
    route = "/webhooks/activities/fail" if "error" in body else "/webhooks/activities/complete"
    assert post(client, route, body).status_code == 422


def test_a_token_of_an_unexposed_workflow_answers_like_a_forged_one(client, inline):
    _, token = deferred(inline, "tests.patterns.awaits-outside-work", "wh-async-3")
    for candidate in (token, token[:-2] + "xx", "not-a-token"):
        answer = post(client, "/webhooks/activities/complete", {"task_token": candidate})
        assert answer.status_code == 404
        assert answer.json()["rejection_reason"] == "activity_not_found"


def test_the_routes_use_the_signature_scheme(client, settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature", "SIGNATURE_SECRET": "s3"}
    stub, token = deferred(inline, "tests.patterns.exposed-outside-work", "wh-async-4")
    body = json.dumps({"task_token": token, "result": "signed"}).encode()
    route = "/webhooks/activities/complete"
    unsigned = client.post(route, data=body, content_type="application/json")
    assert unsigned.status_code == 401
    wrong_type = client.post(route, data=body, content_type="text/plain")
    assert wrong_type.status_code == 415
    signature = sign("s3", method="POST", path=route, body=body)
    signed = client.post(
        route, data=body, content_type="application/json", headers={"X-Signature": signature}
    )
    assert signed.status_code == 200, signed.json()
    inline.run()
    assert stub.refresh().output() == "signed"


# ---------------------------------------------------------------- update-with-start
UWS = "/webhooks/start/order-workflow/updates/mark-ready"


def test_update_with_start_starts_then_answers_with_the_update(client, inline, worker_thread):  # noqa: F811
    body = {"workflow_id": "wh-uws-1", "order_id": 3, "update_arguments": [True, "hook"]}
    first = post(client, UWS, body)
    assert first.status_code == 200, first.json()
    document = first.json()
    assert document["update_status"] == "completed" and document["result"] == {"approved": True}
    assert document["start_outcome"] == "started_new"
    assert document["intake_group_id"]
    again = post(client, UWS, {**body, "update_arguments": {"approved": True}})
    assert again.json()["start_outcome"] == "returned_existing_active"
    refused = post(client, UWS, {**body, "on_duplicate": "reject_duplicate"})
    assert refused.status_code == 409 and refused.json()["outcome"] == "rejected_duplicate"


def test_update_with_start_refuses_before_any_run(client, inline):
    unknown = post(
        client,
        "/webhooks/start/order-workflow/updates/no-such",
        {"workflow_id": "wh-uws-2", "order_id": 1},
    )
    assert unknown.status_code == 404 and unknown.json()["start_outcome"] is None
    invalid = post(client, UWS, {"workflow_id": "wh-uws-3", "order_id": 1, "update_arguments": 5})
    assert invalid.status_code == 422
    assert not WorkflowStub.make("webhooks.order", "wh-uws-2").running()
