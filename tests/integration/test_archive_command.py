"""``workflow_archive`` (by id and by filter, dry run) and ``workflow_prune --archived-only``."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow import WorkflowStub, clock
from durable_workflow.models import HistoryEvent, WorkflowCommand, WorkflowRun
from durable_workflow.visibility import list_runs
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet(inline):
    """Old: two completed, one failed. Recent: one completed. One open run."""
    start("tests.sequential", "old-a", "ada")
    start("tests.sequential", "old-b", "bob")
    start("tests.crashes", "old-failed", "boom")
    inline.run()
    clock.advance(dt.timedelta(days=40))
    start("tests.sequential", "recent", "cy")
    start("tests.approval", "open", "signal")
    inline.run()


def archived() -> set[str]:
    return set(
        WorkflowRun.objects.filter(archived_at__isnull=False).values_list("instance_id", flat=True)
    )


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("workflow_archive", *args, stdout=out)
    return out.getvalue()


def test_by_filter_with_a_dry_run_first(fleet):
    report = json.loads(run("--older-than", "30d", "--dry-run", "--json"))
    assert report["dry_run"] is True and report["total_runs"] == 3
    assert report["outcomes"] == {"would_archive": 3}
    assert archived() == set() and not WorkflowCommand.objects.filter(command_type="archive")
    text = run("--older-than", "30d", "--reason", "retention_policy", "--batch-size", "2")
    assert "archive: 3 archived" in text and "2/3 runs" in text
    assert archived() == {"old-a", "old-b", "old-failed"}
    commands = WorkflowCommand.objects.filter(command_type="archive")
    assert {(c.source, c.reason, c.outcome) for c in commands} == {
        ("cli", "retention_policy", "archived")
    }
    assert commands.count() == 3
    for instance_id in archived():
        last = HistoryEvent.objects.filter(run__instance_id=instance_id).order_by("sequence")
        assert last.last().event_type == "WorkflowArchived"
    assert "nothing to do" in run("--older-than", "30d")  # already archived: not selected
    assert {row.instance_id for row in list_runs()} == {"recent", "open"}


def test_filters_combine(fleet):
    run("--type", "tests.sequential", "--status", "completed", "--older-than", "30d")
    assert archived() == {"old-a", "old-b"}
    cutoff = (clock.now() - dt.timedelta(days=30)).isoformat()
    run("--closed-before", cutoff, "--limit", "5")
    assert archived() == {"old-a", "old-b", "old-failed"}
    run("--type", "tests.sequential")  # no age: every closed run of the type
    assert archived() == {"old-a", "old-b", "old-failed", "recent"}
    assert WorkflowStub.load("open").archived_at() is None  # open runs are never selected


def test_by_instance_and_run_id(fleet):
    recent_run = WorkflowStub.load("recent").run_id()
    dry = json.loads(run("--instance-id", "old-a", "--instance-id", "open", "--dry-run", "--json"))
    assert dry["outcomes"] == {"would_archive": 1, "rejected_run_not_closed": 1}
    assert archived() == set()
    text = run("--instance-id", "old-a", "--instance-id", "open", "--run-id", recent_run)
    assert "archive: 2 archived, 1 rejected_run_not_closed" in text
    assert "open: rejected_run_not_closed" in text
    assert archived() == {"old-a", "recent"}
    again = json.loads(run("--instance-id", "old-a", "--json"))
    assert again["outcomes"] == {"archive_not_needed": 1}
    rejected = WorkflowCommand.objects.get(command_type="archive", instance_id="open")
    assert (rejected.status, rejected.rejection_reason) == ("rejected", "run_not_closed")


def test_refusals(fleet):
    with pytest.raises(CommandError, match="say what to archive"):
        run()
    with pytest.raises(CommandError, match="not both"):
        run("--instance-id", "old-a", "--older-than", "1d")
    with pytest.raises(CommandError):
        run("--older-than", "later")
    with pytest.raises(CommandError):
        run("--closed-before", "yesterday")
    with pytest.raises(CommandError):
        run("--run-id", "not-a-uuid")
    with pytest.raises(CommandError):
        run("--run-id", "01a22724-dcfc-7872-bc9f-b4556a9afc5e")
    with pytest.raises(CommandError, match="not found"):
        run("--instance-id", "nobody")
    with pytest.raises(CommandError, match="reason"):
        run("--instance-id", "old-a", "--reason", "nul\x00byte")
    assert archived() == set()


def prune(*args: str) -> dict:
    out = io.StringIO()
    call_command("workflow_prune", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_prune_archived_only_takes_runs_archived_long_enough_ago(fleet):
    WorkflowStub.load("old-a").archive("retention_policy")
    clock.advance(dt.timedelta(days=10))
    WorkflowStub.load("old-b").archive("retention_policy")
    # Closed 50 days ago, but archived 10 and 0 days ago: the age counts from archiving.
    report = prune("--older-than", "5d", "--archived-only", "--dry-run")
    assert report["archived_only"] is True and report["total_runs"] == 1
    assert archived() == {"old-a", "old-b"}
    done = prune("--older-than", "5d", "--archived-only")
    assert done["pruned_runs"] == 1
    assert not WorkflowRun.objects.filter(instance_id="old-a").exists()
    assert set(WorkflowRun.objects.values_list("instance_id", flat=True)) == {
        "old-b",
        "old-failed",
        "recent",
        "open",
    }
    # Without the flag, prune still takes any closed run past the window, archived or not.
    assert prune("--older-than", "30d", "--dry-run")["total_runs"] == 2


def test_an_archived_run_is_exported_before_pruning(fleet, tmp_path):
    WorkflowStub.load("old-a").archive("retention_policy")
    prune("--older-than", "0d", "--archived-only", "--export-dir", str(tmp_path))
    (bundle_file,) = (tmp_path / "old-a").glob("*.json")
    bundle = json.loads(bundle_file.read_text())
    assert bundle["history_events"][-1]["event_type"] == "WorkflowArchived"
    assert bundle["selected_run"]["archived_at"] is not None
    call_command("workflow_replay", str(tmp_path), stdout=io.StringIO())
