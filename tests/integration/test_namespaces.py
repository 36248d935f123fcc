"""Namespaces: one instance id in two namespaces names two independent workflows."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from durable_workflow import InvalidNamespaceError, WorkflowStub
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.models import Task, WorkflowCommand, WorkflowInstance, WorkflowRun
from durable_workflow.visibility import list_runs

pytestmark = pytest.mark.django_db(transaction=True)


ORDER = "webhooks.order"


def _start(instance_id: str, namespace: str | None, inline) -> WorkflowStub:
    stub = WorkflowStub.make(ORDER, instance_id, namespace=namespace)
    stub.start(1)
    inline.run()
    return stub


def _stage(instance_id: str, namespace: str | None = None) -> str:
    return WorkflowStub.load(instance_id, namespace=namespace).query("current-stage")


def test_one_id_in_two_namespaces_is_two_workflows(inline):
    plain = _start("ns-same", None, inline)
    billing = _start("ns-same", "billing", inline)
    assert plain.namespace == "default" and billing.namespace == "billing"
    assert plain.run_id() != billing.run_id()
    assert WorkflowInstance.objects.filter(instance_id="ns-same").count() == 2
    for stub, space in ((plain, "default"), (billing, "billing")):
        run = WorkflowRun.objects.get(id=stub.run_id())
        assert run.namespace == space
        assert set(Task.objects.filter(run=run).values_list("namespace", flat=True)) == {space}
        assert set(WorkflowCommand.objects.filter(run=run).values_list("namespace", flat=True)) == {
            space
        }

    # signals, queries and loads reach only the namespace they name
    WorkflowStub.load("ns-same", namespace="billing").signal("approved-by", "Taylor")
    inline.run()
    assert _stage("ns-same", "billing") == "approved"
    assert _stage("ns-same") == "waiting"
    assert WorkflowStub.load("ns-same").describe().namespace == "default"
    assert WorkflowStub.load("ns-same", namespace="BILLING").describe().namespace == "billing"
    with pytest.raises(WorkflowNotFoundError):
        WorkflowStub.load("ns-same", namespace="other")
    with pytest.raises(WorkflowNotFoundError):
        WorkflowStub.load_run(billing.run_id(), namespace="default")
    assert WorkflowStub.load_run(billing.run_id()).namespace == "billing"

    WorkflowStub.load("ns-same", namespace="billing").cancel("done")
    inline.run()
    assert WorkflowStub.load("ns-same", namespace="billing").refresh().status() == "cancelled"
    assert WorkflowStub.load("ns-same").refresh().running()

    listed = {(r.namespace, r.instance_id) for r in list_runs(instance_id="ns-same")}
    assert listed == {("default", "ns-same"), ("billing", "ns-same")}
    assert [r.namespace for r in list_runs(instance_id="ns-same", namespace="billing")] == [
        "billing"
    ]


def test_the_default_namespace_comes_from_the_setting(inline):
    with override_settings(DURABLE_WORKFLOW={"NAMESPACE": "Tenant-A"}):
        stub = _start("ns-setting", None, inline)
        assert stub.namespace == "tenant-a"
        assert WorkflowStub.load("ns-setting").run_id() == stub.run_id()
    with pytest.raises(WorkflowNotFoundError):
        WorkflowStub.load("ns-setting")


@pytest.mark.parametrize(
    "bad",
    ["", "a" * 129, "has space", "a/b", "x..y", "nul\x00", "sur\ud800", "k\u212a", 7, "é"],
)
def test_invalid_namespaces_are_refused_before_anything_is_written(bad):
    with pytest.raises(InvalidNamespaceError) as caught:
        WorkflowStub.make(ORDER, "ns-bad", namespace=bad)
    assert caught.value.field == "namespace"
    with pytest.raises(InvalidNamespaceError):
        WorkflowStub.load("ns-bad", namespace=bad)
    with pytest.raises(InvalidNamespaceError):
        list_runs(namespace=bad)
    assert not WorkflowInstance.objects.exists()


def test_webhooks_take_the_namespace_from_header_or_query(client, inline, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    _start("ns-hook", None, inline)
    _start("ns-hook", "billing", inline)
    url = "/webhooks/instances/ns-hook/signals/approved-by"
    body = json.dumps({"arguments": ["Taylor"]})
    answer = client.post(url, body, content_type="application/json", HTTP_X_NAMESPACE="billing")
    assert answer.status_code == 202, answer.content
    inline.run()
    assert _stage("ns-hook", "billing") == "approved"
    assert _stage("ns-hook") == "waiting"
    answer = client.post(url + "?namespace=billing", body, content_type="application/json")
    assert answer.json()["outcome"] == "signal_received"  # the query parameter works too
    answer = client.post(url + "?namespace=nowhere", body, content_type="application/json")
    assert answer.status_code == 404
    answer = client.post(url + "?namespace=a/b", body, content_type="application/json")
    assert answer.status_code == 422
    assert answer.json()["reason"] == "invalid_namespace"
