"""The deploy gate: ``workflow_replay --recent N`` over 100 recorded runs, and bulk exports."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow import registry
from durable_workflow.models import HistoryEvent, Task, WorkflowRun
from durable_workflow.operations import replay_gate
from tests.integration.helpers import start
from tests.testapp import gate

pytestmark = pytest.mark.django_db(transaction=True)


def record(inline, monkeypatch, orders: int) -> None:
    """``orders`` runs of tests.gate-order (every tenth left open), 3 of tests.gate-other."""
    monkeypatch.setitem(gate.GATE_CODE, "variant", "original")
    for n in range(1, orders + 1):
        start("tests.gate-order", f"gate-{n:03}", n)
    for n in range(3):
        start("tests.gate-other", f"other-{n}")
    inline.run()


@pytest.fixture
def recorded(inline, monkeypatch):
    record(inline, monkeypatch, 20)
    return inline


def gate_report(*args: str) -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command("workflow_replay", "--json", *args, stdout=out)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return code, json.loads(out.getvalue())


def footprint() -> tuple[int, int, list]:
    return (
        HistoryEvent.objects.count(),
        Task.objects.count(),
        sorted(WorkflowRun.objects.values_list("id", "status", "updated_at")),
    )


def test_the_selection_is_every_open_run_and_the_last_closed_ones(recorded):
    runs = replay_gate.select_runs(5, ["tests.gate-order"])
    open_runs = [r for r in runs if r.status not in ("completed",)]
    assert len(open_runs) == 2  # every tenth order waits for a signal
    closed = [r.instance_id for r in runs if r.status == "completed"]
    assert closed == ["gate-015", "gate-016", "gate-017", "gate-018", "gate-019"]
    assert {r.workflow_type for r in replay_gate.select_runs(1)} == {
        "tests.gate-order",
        "tests.gate-other",
    }


def test_the_gate_over_100_runs_passes_the_current_code_and_catches_three_changes(
    inline, monkeypatch
):
    record(inline, monkeypatch, 100)
    before = footprint()
    code, report = gate_report("--recent", "100")
    assert code == 0
    assert report["replayed"] == 103 and report["failed"] == 0
    assert {row["workflow_type"]: row["ok"] for row in report["by_type"]} == {
        "tests.gate-order": 100,
        "tests.gate-other": 3,
    }
    for variant, requested in [("inserted", "tests.gate-audit"), ("reordered", "tests.gate-bill")]:
        monkeypatch.setitem(gate.GATE_CODE, "variant", variant)
        code, report = gate_report("--recent", "100", "--type", "tests.gate-order")
        assert code == 1
        assert report["replayed"] == 100 and report["failed"] == 100
        [row] = report["by_type"]
        assert row["nondeterministic"] == 100
        first = report["results"][0]
        assert first["step"] == 1
        assert first["recorded"] == "ActivityScheduled(tests.gate-reserve)"
        assert first["requested"] == f"ActivityScheduled({requested})"
    monkeypatch.setitem(gate.GATE_CODE, "variant", "original")
    monkeypatch.setitem(registry._workflows, "tests.gate-order", gate.GateOrderByParcel)
    code, report = gate_report("--recent", "100", "--type", "tests.gate-order")
    assert code == 1 and report["failed"] == 100
    assert {r["status"] for r in report["results"]} == {"error"}
    assert "Parcel" in report["results"][0]["message"]
    assert footprint() == before  # the gate wrote nothing


def test_the_text_report_is_a_table_with_the_failures_in_full(recorded, monkeypatch):
    monkeypatch.setitem(gate.GATE_CODE, "variant", "reordered")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("workflow_replay", "--recent", "2", stdout=out)
    text = out.getvalue()
    assert "NON-DETERMINISTIC" in text and "requested: ActivityScheduled(tests.gate-bill)" in text
    assert "tests.gate-other" in text and "total" in text
    lines = text.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("workflow type"))
    assert lines[header + 1].split() == ["tests.gate-order", "4", "0", "4", "0"]
    assert lines[header + 2].split() == ["tests.gate-other", "2", "2", "0", "0"]
    assert "2 of 6 replayed cleanly" in text


def test_bulk_export_then_replay_of_the_folder(recorded, tmp_path, monkeypatch):
    call_command(
        "workflow_history_export",
        "--recent",
        "3",
        "--type",
        "tests.gate-order",
        "--output-dir",
        str(tmp_path),
        stderr=io.StringIO(),
    )
    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == 5
    code, report = gate_report(str(tmp_path))
    assert code == 0 and report["replayed"] == 5
    monkeypatch.setitem(gate.GATE_CODE, "variant", "inserted")
    code, report = gate_report(str(tmp_path))
    assert code == 1 and report["failed"] == 5


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--type", "tests.gate-order"],
        ["--recent", "-1"],
    ],
)
def test_bad_gate_arguments_are_refused(args):
    with pytest.raises(CommandError):
        call_command("workflow_replay", *args, stdout=io.StringIO())


@pytest.mark.parametrize(
    "args",
    [
        ["--recent", "3"],
        ["--recent", "3", "--output-dir", "x", "some-instance"],
        ["--recent", "3", "--output-dir", "x", "--redactor", "a.b"],
    ],
)
def test_bad_bulk_export_arguments_are_refused(args):
    with pytest.raises(CommandError):
        call_command("workflow_history_export", *args, stdout=io.StringIO())
