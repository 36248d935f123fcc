"""Bulk recovery from the runs list: select by filter and search (every run of a type
parked on one exception), a dry run that changes nothing, then the action on each run
with a record per run."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.contrib.admin.models import LogEntry

from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.integration.test_admin_actions import OPERATE, changelist, login
from tests.testapp import hostile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def parked(inline, monkeypatch):
    monkeypatch.setitem(hostile.BUGGY, "code", "broken")
    for name in ("bulk-1", "bulk-2"):
        start("tests.buggy", name, "name")
    start("tests.buggy", "bulk-value", "value")  # parked on a ValueError instead
    start("tests.approval", "bulk-waiting", "signal")
    start("tests.sequential", "bulk-done", "ada")
    inline.run()


def _listed(client, **params) -> set[str]:
    page = htmllib.unescape(client.get(changelist(), params).content.decode())
    return set(re.findall(r"(bulk-[\w-]+) #\d+", page))


def _post(client, ids, **fields) -> str:
    data = {"action": "retry_selected", "_selected_action": ids, "apply": "yes", **fields}
    return htmllib.unescape(client.post(changelist(), data, follow=True).content.decode())


def test_select_runs_parked_on_one_exception(client, parked):
    login(client, "op", *OPERATE)
    assert _listed(client, attention="parked") == {"bulk-1", "bulk-2", "bulk-value"}
    found = _listed(client, attention="parked", q="failed:NameError")
    assert found == {"bulk-1", "bulk-2"}
    assert _listed(client, q="failed:builtins.NameError") == {"bulk-1", "bulk-2"}
    assert _listed(client, q="failed:") == set()


def test_a_dry_run_says_what_would_happen_and_changes_nothing(client, parked):
    login(client, "op", *OPERATE)
    ids = [r.pk for r in WorkflowRun.objects.filter(instance_id__startswith="bulk-")]
    page = _post(client, ids, reason="after the fix", dry_run="Dry run")
    assert "Dry run: nothing was changed" in page
    summary = re.search(r'id="dw-preview-summary">([^<]*)<', page).group(1)
    assert summary == "1 rejected_not_active, 1 retry_not_applicable, 3 would_retry"
    assert not WorkflowCommand.objects.filter(source="admin").exists()
    assert not LogEntry.objects.exists()


def test_bulk_retry_after_the_fix_records_each_run(client, parked, inline, monkeypatch):
    login(client, "op", *OPERATE)
    monkeypatch.setitem(hostile.BUGGY, "code", "fixed")
    ids = [
        r.pk
        for r in WorkflowRun.objects.filter(instance_id__in=["bulk-1", "bulk-2", "bulk-waiting"])
    ]
    page = _post(client, ids, reason="NameError fixed in 1.4.2")
    assert "Retry failed workflow task: 2 repair_dispatched." in page
    assert "bulk-waiting" in page and "retry_not_applicable" in page
    assert WorkflowCommand.objects.filter(command_type="repair", source="admin").count() == 2
    assert LogEntry.objects.count() == 3  # one admin record per selected run
    inline.run()
    statuses = dict(WorkflowRun.objects.values_list("instance_id", "status"))
    assert statuses["bulk-1"] == statuses["bulk-2"] == "completed"
    assert statuses["bulk-value"] == "pending"  # not selected: still parked
