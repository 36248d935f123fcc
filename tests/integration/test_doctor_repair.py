"""``workflow_repair --instance-id/--run-id``: the client's repair command from the CLI."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow import clock
from durable_workflow.models import Task, WorkflowCommand, WorkflowRun
from durable_workflow.store import tasks as task_store
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


def repair(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("workflow_repair", "--json", *args, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_lost_task_is_recreated_then_not_needed(inline):
    stub = start("tests.approval", "repair-cli", "signal")
    inline.run()
    Task.objects.filter(run_id=stub.run_id()).delete()
    [first] = repair("--instance-id", "repair-cli", "--reason", "lost after broker crash")
    assert first["outcome"] == "repair_dispatched"
    assert first["run_id"] == stub.run_id()
    command = WorkflowCommand.objects.get(id=first["command_id"])
    assert (command.source, command.reason) == ("cli", "lost after broker crash")
    assert Task.objects.filter(run_id=stub.run_id(), status="ready").exists()
    task = task_store.get(Task.objects.get(run_id=stub.run_id(), status="ready").id)
    assert task_store.claim(task, owner="busy-worker", now=clock.now(), lease_seconds=60)
    [second] = repair("--run-id", stub.run_id())
    assert second["outcome"] == "repair_not_needed"  # a worker holds the task


def test_human_output_and_rejections(inline):
    done = start("tests.sequential", "repair-done", "ada")
    inline.run()
    assert done.refresh().completed()
    out = io.StringIO()
    call_command("workflow_repair", "--instance-id", "repair-done", stdout=out)
    assert out.getvalue().strip() == (
        f"rejected_not_active: repair-done run {done.run_id()} (run_not_active)"
    )
    with pytest.raises(CommandError):
        call_command("workflow_repair", "--instance-id", "missing", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("workflow_repair", "--run-id", "not-a-uuid", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("workflow_repair", "--loop", "--instance-id", "repair-done")


def test_a_run_that_is_not_current_is_refused(inline):
    stub = start("tests.looper", "repair-looper", 2)
    inline.run()
    stub.signal("tick")
    inline.run()
    runs = list(WorkflowRun.objects.filter(instance_id="repair-looper").order_by("run_number"))
    assert len(runs) == 2
    [result] = repair("--run-id", str(runs[0].id))
    assert result["outcome"] == "rejected_not_current"
    assert result["resolved_run_id"] == str(runs[1].id)
    [current] = repair("--run-id", str(runs[1].id))
    assert current["outcome"] in ("repair_dispatched", "repair_not_needed")


def test_plain_pass_still_works(inline):
    out = io.StringIO()
    call_command("workflow_repair", stdout=out)
    assert "reclaimed 0 expired leases" in out.getvalue()


def test_targeted_repair_reclaims_an_expired_lease_and_says_so(inline):
    """Issue 30, item 2: a run whose only open task is held by a dead worker's expired
    lease was answered ``repair_not_needed``; only the full pass reclaimed it."""
    from durable_workflow import executor
    from durable_workflow.executor import activity_task
    from durable_workflow.models import ActivityAttempt

    stub = start("tests.sequential", "repair-expired", "ada")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), status="ready").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    dead = activity_task._claim(task.id)  # the attempt's worker dies here
    [held] = repair("--instance-id", "repair-expired")
    assert held["outcome"] == "repair_not_needed"  # the lease still runs: a worker holds it
    clock.advance(dt.timedelta(seconds=301))  # ACTIVITY_LEASE_SECONDS (300) run out
    out = io.StringIO()
    call_command("workflow_repair", "--instance-id", "repair-expired", stdout=out)
    assert "repair_dispatched: repair-expired" in out.getvalue()
    assert "(reclaimed 1 expired lease(s))" in out.getvalue()
    command = WorkflowCommand.objects.filter(outcome="repair_dispatched").get()
    assert command.metadata == {
        "reclaimed_leases": 1,
        "resent_tasks": 1,
        "recreated_workflow_task": False,
    }
    assert ActivityAttempt.objects.get(id=dead.attempt_id).status == "expired"
    assert Task.objects.get(id=task.id).status == "ready"
    result = stub.repair()  # the same through the client: nothing expired any more
    assert (result.outcome, result.metadata["reclaimed_leases"]) == ("repair_dispatched", 0)
    inline.run()
    assert stub.refresh().output() == ["hello ada", 3]
