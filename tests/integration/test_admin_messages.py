"""Query and update from the admin: declared names, JSON arguments, the answer or the
verdict shown to the operator, permissions, and hostile input refused with a reason."""

from __future__ import annotations

import html as htmllib

import pytest
from django.urls import reverse

from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.integration.test_admin_actions import OPERATE, VIEW, login, operate_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(inline):
    stub = start("tests.approval", "msg-waiting", "updates")
    inline.run()
    return stub


def _post(client, run_id, kind: str, **fields) -> str:
    response = client.post(operate_url(run_id, kind), fields, follow=True)
    assert response.status_code == 200
    return htmllib.unescape(response.content.decode())


def test_the_query_form_offers_the_declared_queries(client, waiting):
    login(client, "op", *OPERATE)
    page = client.get(operate_url(waiting.run_id(), "query")).content.decode()
    for name in ("current-stage", "snapshot", "starts_with"):
        assert f'value="{name}"' in page


def test_a_query_shows_its_answer(client, waiting):
    login(client, "op", *OPERATE)
    page = _post(client, waiting.run_id(), "query", query_name="snapshot", reason="look")
    assert "Query: 1 answered." in page
    assert '"stage": "new"' in page or '"stage":' in page
    page = _post(
        client,
        waiting.run_id(),
        "query",
        query_name="starts_with",
        arguments='["ne"]',
        reason="look",
    )
    assert "Query of msg-waiting" in page and "true" in page


def test_a_closed_run_still_answers_queries(client, inline):
    login(client, "op", *OPERATE)
    stub = start("tests.approval", "msg-closed", "signal")
    inline.run()
    stub.signal("approved-by", "ada")
    inline.run()
    assert WorkflowRun.objects.get(instance_id="msg-closed").status == "completed"
    page = client.get(reverse("admin:durable_workflow_workflowrun_timeline", args=[stub.run_id()]))
    assert b"dw-op-query" in page.content and b"dw-op-cancel" not in page.content
    answer = _post(client, stub.run_id(), "query", query_name="current-stage", reason="r")
    assert '"approved"' in answer


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("starts_with", '{"nope": 1}', "invalid_query_arguments"),
        ("sneaky", "[]", "query_failed"),
    ],
)
def test_a_refused_or_failing_query_says_why(client, waiting, name, arguments, expected):
    login(client, "op", *OPERATE)
    page = _post(
        client, waiting.run_id(), "query", query_name=name, arguments=arguments, reason="r"
    )
    assert "rejected: query_failed" in page and expected in page


def test_an_update_is_submitted_with_the_operators_reason(client, waiting, inline):
    login(client, "op", *OPERATE)
    page = _post(
        client,
        waiting.run_id(),
        "update",
        update_name="add-item",
        arguments='["from-admin"]',
        reason="customer asked",
    )
    assert "Send update: 1 accepted." in page
    command = WorkflowCommand.objects.get(command_type="update", source="admin")
    assert command.payload["reason"] == "customer asked"
    inline.run()
    assert waiting.query("snapshot")["items"] == ["from-admin"]


@pytest.mark.parametrize(
    "fields",
    [
        {"update_name": "no-such-update", "arguments": "[]"},
        {"update_name": "add-item", "arguments": "not json"},
        {"update_name": "add-item", "arguments": '"a string"'},
        {"update_name": "add-item\x00", "arguments": "[]"},
        {"update_name": "add-item", "arguments": "[" * 5000},
    ],
    ids=range(5),
)
def test_hostile_update_input_is_a_form_error(client, waiting, fields):
    login(client, "op", *OPERATE)
    response = client.post(operate_url(waiting.run_id(), "update"), {**fields, "reason": "r"})
    assert response.status_code == 200  # the form again, with its errors
    assert b"errorlist" in response.content
    assert not WorkflowCommand.objects.filter(command_type="update", source="admin").exists()


def test_query_and_update_need_the_operate_permission(client, waiting):
    login(client, "viewer", *VIEW)
    for kind in ("query", "update"):
        assert client.get(operate_url(waiting.run_id(), kind)).status_code == 403
        assert client.post(operate_url(waiting.run_id(), kind), {"reason": "r"}).status_code == 403


def test_query_is_no_bulk_action(client, waiting):
    login(client, "op", *OPERATE)
    page = client.get(reverse("admin:durable_workflow_workflowrun_changelist")).content
    assert b'value="update_selected"' in page and b'value="query_selected"' not in page


def test_deeply_nested_signal_arguments_are_a_form_error(client, waiting):
    """The JSON parser's RecursionError was a 500 on the signal form (found with the
    update form's hostile cases)."""
    login(client, "op", *OPERATE)
    response = client.post(
        operate_url(waiting.run_id(), "signal"),
        {"signal_name": "approved-by", "arguments": "[" * 5000, "reason": "r"},
    )
    assert response.status_code == 200 and b"nested too deeply" in response.content


def test_export_history_downloads_the_archive_bundle(client, waiting, inline):
    login(client, "viewer", *VIEW)
    waiting.signal("approved-by", "ada")  # not its wait, but a recorded signal
    inline.run()
    url = reverse("admin:durable_workflow_workflowrun_export", args=[waiting.run_id()])
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="msg-waiting-run-1.json"'
    bundle = response.json()
    assert bundle["selected_run"]["run_id"] == str(waiting.run_id())
    assert bundle["history_events"] and "integrity" in bundle
    page = client.get(
        reverse("admin:durable_workflow_workflowrun_timeline", args=[waiting.run_id()])
    )
    assert url.encode() in page.content


@pytest.mark.parametrize("object_id", ["nope", "../x", "0" * 40])
def test_export_of_no_such_run_is_404(client, object_id):
    login(client, "viewer", *VIEW)
    base = reverse("admin:durable_workflow_workflowrun_changelist")
    assert client.get(f"{base}{object_id}/export/").status_code == 404


def test_export_needs_the_view_permission(client, waiting):
    login(client, "nobody", "view_workflowinstance")
    url = reverse("admin:durable_workflow_workflowrun_export", args=[waiting.run_id()])
    assert client.get(url).status_code == 403
