"""Reset and fork from the admin: the run page's form, the bulk action, permissions."""

from __future__ import annotations

import pytest

from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.integration.test_admin_actions import OPERATE, TERMINATE, VIEW, changelist, login
from tests.integration.test_admin_actions import operate_url as operate
from tests.testapp import rewind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def failed(inline):
    rewind.FIX["charge"] = False
    stubs = [start("tests.rewind", f"adm-rw-{n}", 1) for n in range(2)]
    inline.run()
    rewind.FIX["charge"] = True
    yield stubs
    rewind.FIX.update(charge=True, body=True)


def test_reset_from_the_run_page(client, failed, inline):
    login(client, "boss", *TERMINATE)
    stub = failed[0]
    run_id = stub.run_id()
    page = client.get(f"/admin/durable_workflow/workflowrun/{run_id}/change/")
    assert operate(run_id, "reset").encode() in page.content  # a button, on a failed run
    form = client.get(operate(run_id, "reset"))
    assert b'name="to"' in form.content and b"Reset (rewind)" in form.content

    # A dry run says what would be kept and changes nothing.
    dry = client.post(
        operate(run_id, "reset"), {"to": "first_failure", "reason": "fixed", "dry_run": "Dry run"}
    )
    assert b"would_reset" in dry.content
    assert WorkflowRun.objects.filter(instance_id="adm-rw-0").count() == 1
    # A point that cannot be resumed: refused, with the reason.
    refused = client.post(
        operate(run_id, "reset"), {"to": "event", "event": 999, "reason": "x"}, follow=True
    )
    assert b"reset_refused (unknown_event)" in refused.content
    assert (
        b"give the event"
        in client.post(operate(run_id, "reset"), {"to": "event", "reason": "x"}).content
    )

    done = client.post(
        operate(run_id, "reset"), {"to": "first_failure", "reason": "card fixed"}, follow=True
    )
    assert b"Reset (rewind): 1 reset." in done.content
    [command] = WorkflowCommand.objects.filter(command_type="reset")
    assert (command.source, command.reason, str(command.run_id)) == ("admin", "card fixed", run_id)
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": []}
    # Both run pages link the other, with the point.
    new_page = client.get(f"/admin/durable_workflow/workflowrun/{stub.run_id()}/change/")
    assert b"reset from (first_failure, cut before event 8)" in new_page.content
    old_page = client.get(f"/admin/durable_workflow/workflowrun/{run_id}/change/")
    assert b"reset to (first_failure, cut before event 8)" in old_page.content
    assert stub.run_id().encode() in old_page.content


def test_fork_from_the_run_page(client, failed, inline):
    login(client, "op", *OPERATE)
    run_id = failed[0].run_id()
    done = client.post(
        operate(run_id, "fork"),
        {"to": "start", "new_instance_id": "adm-rw-copy", "reason": "try it"},
        follow=True,
    )
    assert b"Fork: 1 forked." in done.content
    assert WorkflowCommand.objects.get(command_type="fork").source == "admin"
    assert failed[0].refresh().status() == "failed"  # untouched
    page = client.get(f"/admin/durable_workflow/workflowrun/{run_id}/change/")
    assert b"forked as" in page.content and b"adm-rw-copy #1" in page.content


def test_reset_needs_the_terminate_permission(client, failed):
    run_id = failed[0].run_id()
    login(client, "op", *OPERATE)
    assert client.get(operate(run_id, "reset")).status_code == 403
    assert client.post(operate(run_id, "reset"), {"to": "start", "reason": "x"}).status_code == 403
    client.logout()
    login(client, "viewer", *VIEW)
    assert client.get(operate(run_id, "fork")).status_code == 403
    assert not WorkflowCommand.objects.filter(command_type__in=["reset", "fork"]).exists()


def test_bulk_reset_with_a_dry_run(client, failed, inline):
    login(client, "boss", *TERMINATE)
    ids = [stub.run_id() for stub in failed]
    post = {"action": "reset_selected", "_selected_action": ids, "apply": "yes"}
    dry = client.post(changelist(), {**post, "to": "first_failure", "reason": "r", "dry_run": "1"})
    assert b"2 would_reset" in dry.content
    assert not WorkflowCommand.objects.filter(command_type="reset").exists()
    done = client.post(changelist(), {**post, "to": "first_failure", "reason": "r"}, follow=True)
    assert b"Reset (rewind): 2 reset." in done.content
    inline.run()
    assert all(stub.refresh().completed() for stub in failed)
    assert WorkflowCommand.objects.filter(command_type="reset", source="admin").count() == 2


def test_bulk_reset_of_instances_resets_their_current_runs(client, failed, inline):
    login(client, "boss", *TERMINATE)
    ids = [stub.id() for stub in failed]
    post = {"action": "reset_selected", "_selected_action": ids, "apply": "yes"}
    done = client.post(
        changelist("workflowinstance"), {**post, "to": "start", "reason": "r"}, follow=True
    )
    assert b"Reset (rewind): 2 reset." in done.content
    inline.run()
    assert all(stub.refresh().completed() for stub in failed)
    assert WorkflowRun.objects.filter(reset_from_run__isnull=False).count() == 2
