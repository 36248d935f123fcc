"""``POST .../archive`` by instance and by run: 200 with ``archived`` or
``archive_not_needed``, 409 while the run is open, 404 for what does not exist."""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.integration.test_webhooks import _open_webhooks, looped, post, start_order

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["_open_webhooks", "looped"]  # fixtures used here


def test_archive_an_instance(client, inline):
    start_order(client, "arc-1", inline)
    refused = post(client, "/webhooks/instances/arc-1/archive", {"reason": "too soon"})
    assert refused.status_code == 409
    body = refused.json()
    assert body["outcome"] == "rejected_run_not_closed"
    assert body["rejection_reason"] == "run_not_closed"
    assert WorkflowCommand.objects.get(id=body["command_id"]).status == "rejected"
    WorkflowStub.load("arc-1").terminate("stuck")
    done = post(client, "/webhooks/instances/arc-1/archive", {"reason": "retention_policy"})
    assert done.status_code == 200
    body = done.json()
    assert body["outcome"] == "archived" and body["reason"] == "retention_policy"
    assert body["target_scope"] == "instance"
    command = WorkflowCommand.objects.get(id=body["command_id"])
    assert (command.source, command.reason) == ("webhook", "retention_policy")
    assert WorkflowStub.load("arc-1").archived_at() is not None
    again = post(client, "/webhooks/instances/arc-1/archive")
    assert again.status_code == 200 and again.json()["outcome"] == "archive_not_needed"
    WorkflowStub.make("webhooks.order", "arc-reserved")
    assert post(client, "/webhooks/instances/arc-reserved/archive").status_code == 409
    assert post(client, "/webhooks/instances/missing/archive").status_code == 404
    assert post(client, "/webhooks/instances/arc-1/archive", {"reason": 5}).status_code == 422
    assert post(client, "/webhooks/instances/arc-1/archive", {"why": "x"}).status_code == 422


def test_archive_a_historical_run_while_the_instance_runs(client, looped):
    old = post(client, f"/webhooks/instances/loop-1/runs/{looped['old']}/archive")
    assert old.status_code == 200
    body = old.json()
    assert body["outcome"] == "archived" and body["target_scope"] == "run"
    assert WorkflowRun.objects.get(id=looped["old"]).archived_at is not None
    current = post(client, f"/webhooks/instances/loop-1/runs/{looped['current']}/archive")
    assert current.status_code == 409
    assert current.json()["outcome"] == "rejected_run_not_closed"
    assert WorkflowRun.objects.get(id=looped["current"]).archived_at is None
    missing = "01a22724-dcfc-7872-bc9f-b4556a9afc5e"
    assert post(client, f"/webhooks/instances/loop-1/runs/{missing}/archive").status_code == 404


def test_a_repeated_request_id_answers_the_first_archive(client, inline):
    start_order(client, "arc-req", inline)
    WorkflowStub.load("arc-req").terminate()
    first = post(client, "/webhooks/instances/arc-req/archive", **{"X-Request-Id": "r-1"})
    again = post(client, "/webhooks/instances/arc-req/archive", **{"X-Request-Id": "r-1"})
    assert first.json()["command_id"] == again.json()["command_id"]
    assert again.json()["outcome"] == "archived"
