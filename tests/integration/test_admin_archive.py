"""Archive from the admin: the run page button, the bulk action with its dry run, the
instance action, permissions, and the lists that leave archived runs out."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from durable_workflow.models import HistoryEvent, WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.integration.test_admin_actions import OPERATE, VIEW, changelist, login, operate_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def runs(inline):
    """Two completed runs, one failed run and one open run."""
    for name in ("arch-a", "arch-b"):
        start("tests.sequential", name, "ada")
    start("tests.crashes", "arch-failed", "boom")
    start("tests.approval", "arch-open", "signal")
    inline.run()
    return {run.instance_id: run for run in WorkflowRun.objects.all()}


def _text(response) -> str:
    return htmllib.unescape(response.content.decode())


def _listed(client, model: str = "workflowrun", **params) -> set[str]:
    return set(re.findall(r"(arch-[\w-]+)", _text(client.get(changelist(model), params))))


def _archive_commands() -> list[WorkflowCommand]:
    return list(WorkflowCommand.objects.filter(command_type="archive", source="admin"))


def test_the_run_page_archives_a_closed_run_with_a_reason(client, runs):
    login(client, "op", *OPERATE)
    run = runs["arch-a"]
    page = _text(client.get(reverse("admin:durable_workflow_workflowrun_change", args=[run.pk])))
    assert "dw-op-archive" in page
    open_page = _text(
        client.get(
            reverse("admin:durable_workflow_workflowrun_change", args=[runs["arch-open"].pk])
        )
    )
    assert "dw-op-archive" not in open_page  # an open run has no archive button
    assert client.post(operate_url(run.pk, "archive"), {"reason": ""}).status_code == 200
    assert not _archive_commands()  # the reason is required
    done = client.post(operate_url(run.pk, "archive"), {"reason": "audit done"}, follow=True)
    assert "Archive: 1 archived." in _text(done)
    run.refresh_from_db()
    assert run.archived_at is not None
    (command,) = _archive_commands()
    assert (command.outcome, command.reason, command.run_id) == ("archived", "audit done", run.pk)
    last = HistoryEvent.objects.filter(run_id=run.pk).order_by("sequence").last()
    assert last.event_type == "WorkflowArchived" and last.payload["reason"] == "audit done"
    assert LogEntry.objects.filter(object_id=str(run.pk)).exists()
    page = _text(client.get(reverse("admin:durable_workflow_workflowrun_change", args=[run.pk])))
    assert "dw-op-archive" not in page  # archived already: no button


def test_an_open_run_is_refused_and_the_refusal_recorded(client, runs):
    login(client, "op", *OPERATE)
    run = runs["arch-open"]
    done = client.post(operate_url(run.pk, "archive"), {"reason": "too soon"}, follow=True)
    assert "rejected: rejected_run_not_closed (run_not_closed)" in _text(done)
    (command,) = _archive_commands()
    assert (command.status, command.rejection_reason) == ("rejected", "run_not_closed")
    run.refresh_from_db()
    assert run.archived_at is None


def test_the_bulk_action_previews_then_archives_each_run(client, runs):
    login(client, "op", *OPERATE)
    ids = [run.pk for run in runs.values()]
    data = {"action": "archive_selected", "_selected_action": ids, "apply": "yes"}
    page = _text(client.post(changelist(), {**data, "reason": "q3", "dry_run": "Dry run"}))
    summary = re.search(r'id="dw-preview-summary">([^<]*)<', page).group(1)
    assert summary == "1 rejected_run_not_closed, 3 would_archive"
    assert not _archive_commands()
    done = _text(client.post(changelist(), {**data, "reason": "q3"}, follow=True))
    assert "Archive: 3 archived." in done
    assert "rejected: rejected_run_not_closed" in done
    assert sorted(c.outcome for c in _archive_commands()) == [
        "archived",
        "archived",
        "archived",
        "rejected_run_not_closed",
    ]
    assert set(
        WorkflowRun.objects.filter(archived_at__isnull=False).values_list("instance_id", flat=True)
    ) == {"arch-a", "arch-b", "arch-failed"}


def test_the_runs_list_leaves_archived_runs_out_and_filters_for_them(client, runs):
    login(client, "viewer", *VIEW)
    from durable_workflow import WorkflowStub

    WorkflowStub.load("arch-b").archive("old")
    WorkflowStub.load("arch-failed").archive("old")
    assert _listed(client) == {"arch-a", "arch-open"}
    assert _listed(client, status="failed") == set()
    assert _listed(client, archived="yes") == {"arch-b", "arch-failed"}
    assert _listed(client, archived="all") == {"arch-a", "arch-b", "arch-failed", "arch-open"}
    assert _listed(client, archived="yes", status="failed") == {"arch-failed"}
    page = _text(client.get(changelist()))
    assert "Not archived" in page and "Archived only" in page
    # The archived run's own pages still open.
    archived = runs["arch-b"]
    for name in ("change", "timeline"):
        url = reverse(f"admin:durable_workflow_workflowrun_{name}", args=[archived.pk])
        assert client.get(url).status_code == 200
    # Instances whose newest run is archived leave the instances list the same way.
    assert _listed(client, "workflowinstance") == {"arch-a", "arch-open"}
    assert _listed(client, "workflowinstance", archived="yes") == {"arch-b", "arch-failed"}


def test_archive_needs_the_operate_permission(client, runs):
    login(client, "viewer", *VIEW)
    run = runs["arch-a"]
    assert client.get(operate_url(run.pk, "archive")).status_code == 403
    assert client.post(operate_url(run.pk, "archive"), {"reason": "x"}).status_code == 403
    client.post(
        changelist(),
        {"action": "archive_selected", "_selected_action": [run.pk], "apply": "yes", "reason": "x"},
    )
    assert "archive_selected" not in _text(client.get(changelist()))
    assert not WorkflowCommand.objects.filter(command_type="archive").exists()


def test_the_instance_action_archives_the_whole_instance(client, inline):
    stub = start("tests.looper", "arch-chain", 2)
    inline.run()
    stub.signal("tick")
    inline.run()
    stub.signal("tick")
    inline.run()
    assert stub.refresh().completed()
    login(client, "op", *OPERATE)
    url = operate_url("arch-chain", "archive", "workflowinstance")
    instance_page = _text(
        client.get(reverse("admin:durable_workflow_workflowinstance_change", args=["arch-chain"]))
    )
    assert url in instance_page
    assert client.post(url, {"reason": "chain done"}).status_code == 302
    assert not WorkflowRun.objects.filter(instance_id="arch-chain", archived_at=None).exists()
    (command,) = _archive_commands()
    assert len(command.metadata["archived_run_ids"]) == 2


def test_the_dashboard_counts_leave_archived_runs_out_like_its_links(client, runs):
    from durable_workflow import WorkflowStub

    login(client, "viewer", *VIEW)
    WorkflowStub.load("arch-a").archive("old")
    page = _text(client.get(reverse("admin:durable_workflow_dashboard")))
    completed = page.split('id="dw-status-completed"', 1)[1].split("</tr>", 1)[0]
    href, number = re.search(r'<a href="([^"]+)">(\d+)</a>', completed).groups()
    assert number == "1"
    listed = set(re.findall(r"(arch-[\w-]+)", _text(client.get(href))))
    assert listed == {"arch-b"}
