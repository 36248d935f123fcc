"""What ``workflow_doctor`` reads: the same findings as before its queries were reshaped
(parked and lost runs told apart), and rows read back that do not grow with the open runs."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections

from durable_workflow.models import Task, WorkflowRun
from durable_workflow.operations.queries import (
    newest_instances,
    open_runs,
    runs_missing_their_task,
    runs_stopped_on_failed_task,
)
from durable_workflow.store import database
from tests.integration.helpers import start
from tests.integration.test_doctor import (
    check,
    doctor,
    fail_a_workflow_task,
    forget_warm_bodies,
    run_next,
)
from tests.testapp import workflows

pytestmark = pytest.mark.django_db(transaction=True)


def resume_paths() -> dict:
    return check(doctor(), "durable_resume_paths")


def test_parked_and_recovered_runs_are_told_apart(inline, monkeypatch):
    """A run whose latest workflow task failed is parked; one whose failed workflow task
    was followed by a completed one is not, and, pending with its task lost, it is a lost
    run; a parked run that is pending and has no open task is parked, not lost."""
    fail_a_workflow_task("reads-parked", monkeypatch)
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 1)
    recovered = fail_a_workflow_task("reads-recovered", monkeypatch)
    call_command("workflow_repair", "--instance-id", "reads-recovered", stdout=io.StringIO())
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 1)  # the fix deployed
    forget_warm_bodies()
    assert run_next(recovered, "workflow") == "completed"  # after the failed one

    details = resume_paths()["details"]
    assert details["failed_workflow_task"] == ["reads-parked"]
    assert details["missing_task"] == []

    # Both runs pending, neither with an open task: only the recovered one is lost.
    runs = WorkflowRun.objects.filter(instance_id__in=["reads-parked", "reads-recovered"])
    Task.objects.filter(run__in=runs, status__in=("ready", "leased")).delete()
    runs.update(status="pending")
    resume = resume_paths()
    assert resume["status"] == "error"
    assert resume["details"]["failed_workflow_task"] == ["reads-parked"]
    assert resume["details"]["missing_task"] == ["reads-recovered"]
    assert resume["details"]["affected_instances"] == {
        "count": 2,
        "first": ["reads-parked", "reads-recovered"],
    }
    # The querysets the admin and the metrics share say the same.
    assert [r.instance_id for r in runs_stopped_on_failed_task()] == ["reads-parked"]
    assert [r.instance_id for r in runs_missing_their_task()] == ["reads-recovered"]


def test_newest_instances_reads_in_chunks(inline, monkeypatch):
    """The parked runs are read by primary key in chunks; the newest come first whichever
    chunk holds them."""
    from durable_workflow.operations import queries

    ids = []
    for index in range(5):
        ids.append(start("tests.sequential", f"reads-chunk-{index}", "ada").run_id())
    monkeypatch.setattr(queries, "ID_CHUNK", 2)
    newest = [f"reads-chunk-{index}" for index in (4, 3, 2)]
    assert newest_instances(open_runs(), ids, 3) == newest
    assert newest_instances(open_runs(), list(reversed(ids)), 3) == newest
    assert newest_instances(open_runs(), [], 3) == []


def rows_read(alias: str) -> list[int]:
    """Runs the doctor once; the rows each of its statements sent back."""
    counts: list[int] = []

    def count_rows(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        counts.append(max(context["cursor"].rowcount, 0))
        return result

    with connections[alias].execute_wrapper(count_rows):
        doctor()
    return counts


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3",
    reason="SQLite reports no row count for a SELECT",
)
def test_the_doctor_reads_back_as_many_rows_for_3_or_30_open_runs(inline):
    """Nothing wrong with any run: what the doctor reads back is one row per type, queue
    or marker, not per open run or task (a model's default ordering once put created_at
    into its DISTINCTs, sending every open run and every ready task back)."""
    rows = {}
    for size in (3, 30):
        while open_runs().count() < size:
            stub = start("tests.sequential", f"reads-open-{open_runs().count()}", "ada")
            assert run_next(stub, "workflow") == "completed"  # waits on its activity
        rows[size] = rows_read(database.alias())
    assert len(rows[30]) == len(rows[3]), rows
    assert sum(rows[30]) == sum(rows[3]), rows
