"""``workflow_prune``: closed runs past retention go, with every row they own."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow import clock
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    HistoryEvent,
    SearchAttribute,
    Task,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowInstance,
    WorkflowRun,
    WorkflowSignal,
)
from durable_workflow.operations.prune import candidates, count_rows, parse_age
from tests.integration.helpers import distinct_reads, start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def aged(inline):
    """Two old closed runs (one with retries and failures), one recent, one open."""
    old = start("tests.sequential", "old-done", "ada")
    flaky = start("tests.catch-failure", "old-flaky")
    signalled = start("tests.approval", "old-signalled", "signal")
    inline.run()
    signalled.signal("approved-by", "dora")
    inline.run()
    for stub in (old, flaky, signalled):
        assert stub.refresh().completed()
    SearchAttribute.objects.create(run_id=old.run_id(), key="region", value_string="eu")
    clock.advance(dt.timedelta(days=40))
    recent = start("tests.sequential", "recent-done", "bob")
    inline.run()
    waiting = start("tests.approval", "still-open", "signal")
    inline.run()
    assert recent.refresh().completed()
    assert not waiting.refresh().completed()
    return {"old": [old, flaky, signalled], "kept": [recent, waiting]}


def test_parse_age():
    assert parse_age("90d") == dt.timedelta(days=90)
    assert parse_age("12h") == dt.timedelta(hours=12)
    assert parse_age("2w") == dt.timedelta(weeks=2)
    assert parse_age("30") == dt.timedelta(days=30)
    with pytest.raises(ValueError):
        parse_age("soon")


def test_dry_run_counts_and_deletes_nothing(aged):
    before = {m: m.objects.count() for m in (WorkflowRun, HistoryEvent, Task, WorkflowCommand)}
    out = io.StringIO()
    call_command("workflow_prune", "--older-than", "30d", "--dry-run", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["dry_run"] is True
    assert report["total_runs"] == 3
    old_ids = [s.run_id() for s in aged["old"]]
    assert (
        report["rows"]["history_events"] == HistoryEvent.objects.filter(run_id__in=old_ids).count()
    )
    assert report["rows"]["instances"] == 3
    assert report["rows"]["signals"] == 1
    assert report["rows"]["search_attributes"] == 1
    assert {m: m.objects.count() for m in before} == before


def test_prune_deletes_old_runs_and_everything_they_own(aged):
    old_ids = [s.run_id() for s in aged["old"]]
    assert WorkflowFailure.objects.filter(run_id__in=old_ids).exists()  # the caught failure
    assert WorkflowSignal.objects.filter(run_id__in=old_ids).exists()
    out = io.StringIO()
    call_command("workflow_prune", "--older-than", "30d", "--batch-size", "1", stdout=out)
    text = out.getvalue()
    assert "[##########--------------------] 1/3 runs (33%)" in text
    assert "3/3 runs (100%)" in text
    assert "pruned 3 run(s)" in text
    assert not WorkflowRun.objects.filter(id__in=old_ids).exists()
    owned = (
        HistoryEvent,
        Task,
        ActivityExecution,
        WorkflowFailure,
        WorkflowCommand,
        WorkflowSignal,
    )
    for model in owned:
        assert not model.objects.filter(run_id__in=old_ids).exists(), model
    assert not ActivityAttempt.objects.filter(execution__run_id__in=old_ids).exists()
    assert not WorkflowInstance.objects.filter(
        instance_id__in=["old-done", "old-flaky", "old-signalled"]
    ).exists()
    assert not WorkflowCommand.objects.filter(
        instance_id__in=["old-done", "old-flaky", "old-signalled"]
    ).exists()
    for stub in aged["kept"]:
        assert WorkflowRun.objects.filter(id=stub.run_id()).exists()
        assert HistoryEvent.objects.filter(run_id=stub.run_id()).exists()
    # and the kept runs still work
    kept = aged["kept"][1]
    assert kept.refresh().history()


def test_prune_exports_first(aged, tmp_path):
    out = io.StringIO()
    call_command("workflow_prune", "--older-than", "30d", "--export-dir", str(tmp_path), stdout=out)
    files = sorted(p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*.json"))
    assert files == ["old-done", "old-flaky", "old-signalled"]
    bundle = json.loads(next((tmp_path / "old-done").glob("*.json")).read_text())
    assert bundle["history_complete"] is True
    call_command("workflow_replay", str(tmp_path), stdout=io.StringIO())


def test_status_filter_and_nothing_to_do(aged):
    out = io.StringIO()
    call_command("workflow_prune", "--older-than", "30d", "--status", "failed", stdout=out)
    assert "pruned 0 run(s)" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("workflow_prune", "--older-than", "later")


HOSTILE_IDS = [".", "..", "...", ".hidden", "-rf", "tenant:42:order", "a" * 191, ":" * 191]


def test_export_files_stay_inside_the_directory_whatever_the_id(inline, tmp_path):
    """Issue 18, item 5: the ids '.' and '..' are valid, and once became '<dir>/..'."""
    from durable_workflow.ids import instance_id_from_file_name

    for instance_id in HOSTILE_IDS:
        start("tests.sequential", instance_id, "ada")
    inline.run()
    clock.advance(dt.timedelta(days=40))
    export = tmp_path / "exports"
    call_command(
        "workflow_prune", "--older-than", "30d", "--export-dir", str(export), stdout=io.StringIO()
    )
    written = sorted(tmp_path.rglob("*.json"))
    assert len(written) == len(HOSTILE_IDS)
    exported = {}
    for path in written:
        assert path.resolve().is_relative_to(export.resolve()), path
        assert path.parent.parent == export  # one directory per instance, nothing deeper
        bundle = json.loads(path.read_text())
        exported[instance_id_from_file_name(path.parent.name)] = bundle["workflow"]["instance_id"]
    assert exported == {instance_id: instance_id for instance_id in HOSTILE_IDS}
    assert not WorkflowRun.objects.exists()


def test_an_instance_directory_that_leads_elsewhere_is_not_written(inline, tmp_path):
    start("tests.sequential", "linked", "ada")
    inline.run()
    clock.advance(dt.timedelta(days=40))
    export, elsewhere = tmp_path / "exports", tmp_path / "elsewhere"
    export.mkdir()
    elsewhere.mkdir()
    (export / "linked").symlink_to(elsewhere, target_is_directory=True)
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 run"):
        call_command(
            "workflow_prune",
            "--older-than",
            "30d",
            "--export-dir",
            str(export),
            "--json",
            stdout=out,
        )
    report = json.loads(out.getvalue())
    assert report["pruned_runs"] == 0
    assert "resolves outside" in report["skipped"][0]["reason"]
    assert list(elsewhere.iterdir()) == []
    assert WorkflowRun.objects.filter(instance_id="linked").exists()


def test_the_dry_run_reads_each_instance_once_whatever_its_runs(inline):
    """An ordering inside the dry run's DISTINCT reads (the candidates' closed_at and id,
    the model's default created_at) sent back one row per run instead of per instance."""
    chain = start("tests.patterns.carry", "prune-carry", [], 4)
    inline.run()
    for _ in range(2):  # two runs continue as new
        chain.signal("add", "x")
        inline.run()
    start("tests.sequential", "prune-alone", "ada")
    inline.run()
    clock.advance(dt.timedelta(days=40))
    chain.signal("add", "x")  # the third run closes now, the fourth waits
    inline.run()
    assert WorkflowRun.objects.filter(instance_id="prune-carry").count() == 4

    runs = candidates(clock.now() - dt.timedelta(days=30))
    counted: dict[str, int] = {}
    reads = distinct_reads(lambda: counted.update(count_rows(runs)))

    assert counted["runs"] == 3 and counted["instances"] == 1  # prune-alone goes
    assert [rows for _, rows in reads] == [2, 1]  # the two old ones, then prune-carry kept
    assert not [sql for sql, _ in reads if "ORDER BY" in sql.upper()]
