"""Admin operator actions: the client's commands, with the operator's reason and permissions."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from durable_workflow.models import Task, WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.testapp import workflows

pytestmark = pytest.mark.django_db(transaction=True)


def forget_warm_bodies() -> None:
    """Drop warm (sticky) workflow bodies so the next workflow task replays the new code."""
    try:
        from durable_workflow.executor import sticky
    except ImportError:  # an engine without a sticky cache replays cold anyway
        return
    sticky.cache.clear()


VIEW = ("view_workflowrun", "view_workflowinstance")
OPERATE = (*VIEW, "change_workflowrun")
TERMINATE = (*OPERATE, "delete_workflowrun")


def login(client, username: str, *codenames: str):
    user = User.objects.create_user(username, password="x", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="durable_workflow", codename__in=codenames
        )
    )
    client.force_login(user)
    return client


def operate_url(run_id, kind: str, model: str = "workflowrun") -> str:
    return reverse(f"admin:durable_workflow_{model}_operate", args=[run_id, kind])


def changelist(model: str = "workflowrun") -> str:
    return reverse(f"admin:durable_workflow_{model}_changelist")


@pytest.fixture
def waiting(inline):
    stub = start("tests.approval", "act-waiting", "signal")
    inline.run()
    return stub


def commands(kind: str) -> list[WorkflowCommand]:
    return list(WorkflowCommand.objects.filter(command_type=kind, source="admin"))


def test_cancel_through_a_changelist_action(client, waiting, inline):
    login(client, "op", *OPERATE)
    run_id = waiting.run_id()
    confirm = client.post(changelist(), {"action": "cancel_selected", "_selected_action": [run_id]})
    assert confirm.status_code == 200
    assert b"act-waiting" in confirm.content and b'name="reason"' in confirm.content
    assert not commands("cancel")  # nothing happens before the reason is given
    done = client.post(
        changelist(),
        {
            "action": "cancel_selected",
            "_selected_action": [run_id],
            "apply": "yes",
            "reason": "customer asked",
        },
        follow=True,
    )
    assert b"Cancel: 1 cancelled." in done.content
    [command] = commands("cancel")
    assert (command.reason, command.outcome, str(command.run_id)) == (
        "customer asked",
        "cancelled",
        run_id,
    )
    inline.run()
    assert waiting.refresh().cancelled()
    entry = LogEntry.objects.get(object_id=run_id)
    assert "customer asked" in entry.change_message and entry.user.username == "op"


def test_reason_is_required(client, waiting):
    login(client, "op", *OPERATE)
    response = client.post(operate_url(waiting.run_id(), "cancel"), {"reason": ""})
    assert response.status_code == 200
    assert b"This field is required" in response.content
    assert not commands("cancel")


def test_actions_need_permissions(client, waiting):
    login(client, "viewer", *VIEW)
    run_id = waiting.run_id()
    for kind in ("cancel", "terminate", "repair", "retry", "signal"):
        assert client.get(operate_url(run_id, kind)).status_code == 403
        assert client.post(operate_url(run_id, kind), {"reason": "x"}).status_code == 403
    response = client.post(
        changelist(),
        {"action": "cancel_selected", "_selected_action": [run_id], "apply": "yes", "reason": "x"},
    )
    assert response.status_code in (200, 302)
    assert not WorkflowCommand.objects.filter(source="admin").exists()
    page = client.get(changelist()).content.decode()
    assert "cancel_selected" not in page  # the action is not offered
    timeline = client.get(reverse("admin:durable_workflow_workflowrun_timeline", args=[run_id]))
    assert b"dw-op-cancel" not in timeline.content


def test_terminate_needs_the_delete_permission(client, waiting):
    login(client, "op", *OPERATE)
    run_id = waiting.run_id()
    assert client.get(operate_url(run_id, "terminate")).status_code == 403
    page = client.get(changelist()).content.decode()
    assert "cancel_selected" in page and "terminate_selected" not in page
    login(client, "boss", *TERMINATE)
    response = client.post(operate_url(run_id, "terminate"), {"reason": "fraud"}, follow=True)
    assert b"Terminate: 1 terminated." in response.content
    assert waiting.refresh().terminated()
    assert commands("terminate")[0].reason == "fraud"


def test_signal_with_declared_names_and_json_arguments(client, waiting, inline):
    login(client, "op", *OPERATE)
    url = operate_url(waiting.run_id(), "signal")
    form = client.get(url).content.decode()
    assert '<option value="approved-by">' in form  # declared signals offered
    bad = client.post(url, {"signal_name": "approved-by", "arguments": "{nope", "reason": "r"})
    assert b"not valid JSON" in bad.content
    response = client.post(
        url,
        {"signal_name": "approved-by", "arguments": json.dumps(["dora"]), "reason": "manual"},
        follow=True,
    )
    assert b"Send signal: 1 signal_received." in response.content
    [command] = commands("signal")
    assert command.payload["reason"] == "manual" and command.payload["operator"] == "op"
    inline.run()
    assert waiting.refresh().output() == "dora"


def test_repair_and_retry_from_a_failed_workflow_task(client, inline, monkeypatch):
    login(client, "op", *OPERATE)
    stub = start("tests.sequential", "act-retry", "ada")
    from durable_workflow import executor

    def run_next(kind):
        task = Task.objects.filter(run_id=stub.run_id(), task_type=kind, status="ready").first()
        return {"workflow": executor.run_workflow_task, "activity": executor.run_activity_task}[
            kind
        ](task.id)

    for kind in ("workflow", "activity", "workflow", "activity"):
        run_next(kind)
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)
    forget_warm_bodies()
    assert run_next("workflow") == "failed"
    html = client.get(
        reverse("admin:durable_workflow_workflowrun_timeline", args=[stub.run_id()])
    ).content.decode()
    assert "NonDeterminismError" in html and "Traceback" in html  # the task failure, in full

    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 1)  # the fix is deployed
    response = client.post(
        operate_url(stub.run_id(), "retry"), {"reason": "fixed in 1.2.3"}, follow=True
    )
    assert b"Retry failed workflow task: 1 repair_dispatched." in response.content
    assert commands("repair")[0].reason == "fixed in 1.2.3"
    inline.run()
    assert stub.refresh().completed()

    again = client.post(operate_url(stub.run_id(), "retry"), {"reason": "again"}, follow=True)
    assert b"rejected: rejected_not_active" in again.content


def test_retry_is_refused_without_a_failed_task_and_repair_is_not(client, waiting):
    login(client, "op", *OPERATE)
    refused = client.post(operate_url(waiting.run_id(), "retry"), {"reason": "r"}, follow=True)
    assert b"retry_not_applicable (no_failed_workflow_task)" in refused.content
    repaired = client.post(operate_url(waiting.run_id(), "repair"), {"reason": "r"}, follow=True)
    assert b"Repair: 1 repair_not_needed." in repaired.content  # a healthy waiting run
    assert [c.source for c in commands("repair")] == ["admin"]


def test_instance_actions_target_the_current_run_and_stale_runs_are_rejected(client, inline):
    login(client, "op", *OPERATE)
    looper = start("tests.looper", "act-looper", 2)
    inline.run()
    looper.signal("tick")
    inline.run()
    first, current = WorkflowRun.objects.filter(instance_id="act-looper").order_by("run_number")
    stale = client.post(operate_url(first.pk, "cancel"), {"reason": "old"}, follow=True)
    assert b"rejected: rejected_not_current (selected_run_not_current)" in stale.content
    response = client.post(
        changelist("workflowinstance"),
        {
            "action": "cancel_selected",
            "_selected_action": ["act-looper"],
            "apply": "yes",
            "reason": "stop the loop",
        },
        follow=True,
    )
    assert b"Cancel: 1 cancelled." in response.content
    [accepted] = [c for c in commands("cancel") if c.status == "accepted"]
    assert accepted.run_id == current.pk
    form = client.get(operate_url("act-looper", "signal", "workflowinstance"))
    assert form.status_code == 200


def test_bulk_action_reports_each_rejection(client, waiting, inline):
    login(client, "op", *OPERATE)
    done = start("tests.sequential", "act-done", "ada")
    inline.run()
    response = client.post(
        changelist(),
        {
            "action": "cancel_selected",
            "_selected_action": [waiting.run_id(), done.run_id()],
            "apply": "yes",
            "reason": "cleanup",
        },
        follow=True,
    )
    html = response.content.decode()
    assert "Cancel: 1 cancelled." in html
    assert "rejected: rejected_not_active (run_not_active)" in html
    assert WorkflowCommand.objects.filter(command_type="cancel", reason="cleanup").count() == 2


def test_run_and_instance_pages_offer_the_allowed_buttons(client, waiting):
    login(client, "op", *OPERATE)
    run_page = client.get(
        reverse("admin:durable_workflow_workflowrun_change", args=[waiting.run_id()])
    ).content.decode()
    assert "dw-op-cancel" in run_page and "dw-op-terminate" not in run_page
    assert "dw-timeline-link" in run_page
    instance_page = client.get(
        reverse("admin:durable_workflow_workflowinstance_change", args=["act-waiting"])
    ).content.decode()
    assert operate_url("act-waiting", "cancel", "workflowinstance") in instance_page
    response = client.post(
        operate_url("act-waiting", "repair", "workflowinstance"), {"reason": "from page"}
    )
    assert response.status_code == 302
    assert commands("repair")[0].reason == "from page"
