"""``deduplication_id`` on the webhook starts (issue 26): accepted, checked at the door,
and a second start naming the id while its run is open answered 409 with the reason."""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import WorkflowCommand, WorkflowInstance, WorkflowRun
from tests.integration.test_webhooks import ORDER, _open_webhooks, post  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

CONTROL = "/webhooks/control-plane/start"


def test_a_second_start_with_the_id_is_refused_with_its_reason(client, inline):
    first = post(client, ORDER, {"order_id": 1, "deduplication_id": "order-1"})
    assert first.status_code == 202, first.json()
    run = WorkflowRun.objects.get(id=first.json()["run_id"])
    assert run.deduplication_id == "order-1"
    again = post(client, ORDER, {"order_id": 1, "deduplication_id": "order-1"})
    assert again.status_code == 409
    body = again.json()
    assert body["outcome"] == "rejected_duplicate"
    assert body["rejection_reason"] == "deduplication_id_in_use"
    assert body["run_id"] is None
    assert first.json()["workflow_id"] not in again.content.decode()  # the holder is not named
    command = WorkflowCommand.objects.get(id=body["command_id"])
    assert (command.status, command.rejection_reason) == ("rejected", "deduplication_id_in_use")
    # Once the holder closes, the id is free again.
    WorkflowStub.load(first.json()["workflow_id"]).terminate("done")
    assert post(client, ORDER, {"order_id": 1, "deduplication_id": "order-1"}).status_code == 202


def test_the_control_plane_start_takes_one_too(client, inline):
    body = {"workflow_type": "webhooks.order", "arguments": [1], "deduplication_id": "cp-1"}
    assert post(client, CONTROL, body).status_code == 202
    refused = post(client, CONTROL, body)
    assert refused.status_code == 409
    assert refused.json()["reason"] == "deduplication_id_in_use"
    assert refused.json()["started"] is False


@pytest.mark.parametrize("url", [ORDER, CONTROL])
@pytest.mark.parametrize("value", ["", "a\tb", "a\x00b", "\ud800", "x" * 192, 7, ["a"], True])
def test_a_bad_id_is_refused_before_anything_is_written(client, url, value):
    body = (
        {"order_id": 1, "deduplication_id": value}
        if url == ORDER
        else {"workflow_type": "webhooks.order", "arguments": [1], "deduplication_id": value}
    )
    response = post(client, url, body)
    assert response.status_code == 422, response.content
    # (NUL and lone surrogates are refused with the whole body, before any field.)
    assert set(response.json()["validation_errors"]) & {"deduplication_id", "body"}
    assert not WorkflowInstance.objects.exists()
