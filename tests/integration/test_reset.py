"""Reset and fork: a new run from a point of an old run's history (SQLite and PostgreSQL).

Every run status (completed, failed, cancelled, terminated, parked on a failed
workflow task) is reset to every point kind that applies; the reset run must finish
as a fresh run of the same inputs does, and its history must replay clean.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from durable_workflow import (
    InvalidInstanceIdError,
    InvalidValueError,
    ResetRefusedError,
    WorkflowStub,
)
from durable_workflow.models import WorkflowCommand, WorkflowRun, WorkflowSignal
from durable_workflow.testing import Replayer
from tests.integration.helpers import event_types, events_of, start
from tests.testapp import rewind
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fixed():
    rewind.FIX.update(charge=True, body=True)
    yield
    rewind.FIX.update(charge=True, body=True)


def _finish(inline: Any, stub: WorkflowStub, mode: str) -> None:
    """Drain the run; a waiting one gets its ``note`` signal first (unless it has one)."""
    inline.run()
    if mode == "wait" and stub.refresh().running():
        stub.signal("note", "go")
        inline.run()
    stub.refresh()


def _run_ending(inline: Any, status: str, instance_id: str) -> tuple[WorkflowStub, str]:
    """A run of ``tests.rewind`` that ended ``status`` (``parked``: open, task failed;
    ``waiting``: open, waiting on its ``note`` signal)."""
    mode = "wait" if status in ("cancelled", "terminated", "waiting") else "plain"
    if status == "failed":
        rewind.FIX["charge"] = False
    if status == "parked":
        rewind.FIX["body"] = False
    stub = start("tests.rewind", instance_id, 1, mode)
    inline.run()
    if status == "cancelled":
        stub.cancel("changed my mind")
        inline.run()
    elif status == "terminated":
        stub.terminate("stop now")
    elif status == "completed":
        _finish(inline, stub, mode)
    rewind.FIX.update(charge=True, body=True)  # the fix is deployed
    stub.refresh()
    if status == "parked":
        assert stub.running() and stub.describe().task_failure
    else:
        assert stub.status() == status
    return stub, mode


def _event_point(stub: WorkflowStub) -> int:
    """The last ``ActivityScheduled`` (the charge's; a waiting run's only one): written
    by a workflow task, so the cut backs off to where that task began."""
    scheduled = [e.sequence for e in stub.history() if e.event_type == "ActivityScheduled"]
    return scheduled[-1]


# Every point kind for every status it applies to. ``first_failure`` of a run with no
# failure is refused (``no_failure``: ``test_first_failure_of_a_run_without_one``);
# ``last_workflow_task`` of a failed run keeps the activity's failure, so it fails
# again (``test_what_each_point_keeps``).
POINTS = {
    "completed": ["start", "last_workflow_task", "event"],
    "failed": ["start", "first_failure", "event"],
    "parked": ["start", "first_failure", "last_workflow_task", "event"],
    "cancelled": ["start", "last_workflow_task", "event"],
    "terminated": ["start", "last_workflow_task", "event"],
    "waiting": ["start", "last_workflow_task", "event"],
}
CASES = [(status, point) for status, points in POINTS.items() for point in points]
#: Statuses whose old run a reset finds open, and terminates.
OPEN = ("parked", "waiting")


@pytest.mark.parametrize(("status", "point"), CASES)
def test_reset_every_status_to_every_point(inline, status, point):
    stub, mode = _run_ending(inline, status, f"rw-{status}-{point}")
    old_id = stub.run_id()
    old_events = len(stub.history())
    to: str | int = _event_point(stub) if point == "event" else point

    result = stub.reset(to, reason=f"rewind {status}")

    assert result.kind == "reset" and result.reset_from_run_id == old_id
    assert stub.run_id() == result.run_id != old_id
    _finish(inline, stub, mode)
    assert stub.status() == "completed", event_types(stub)
    notes = ["go"] if mode == "wait" else []
    assert stub.output() == {"first": 2, "second": 20, "notes": notes}
    # Lineage on both runs, the old run closed (a parked one terminated by the reset).
    new_row = WorkflowRun.objects.get(id=result.run_id)
    old_row = WorkflowRun.objects.get(id=old_id)
    assert str(new_row.reset_from_run_id) == old_id and new_row.run_number == 2
    assert str(old_row.reset_to_run_id) == result.run_id
    assert old_row.reset_point == new_row.reset_point == result.reset_point
    assert result.reset_point["reason"] == f"rewind {status}"
    assert old_row.status == ("terminated" if status in OPEN else status)
    assert result.terminated_old_run is (status in OPEN)
    if status in OPEN:
        assert events_of(WorkflowStub.load_run(old_id), "WorkflowTerminated")[0]["reason"] == (
            f"reset: rewind {status}"
        )
    else:
        assert len(WorkflowStub.load_run(old_id).history()) == old_events
    command = WorkflowCommand.objects.get(command_type="reset", run_id=old_id)
    assert command.source == "client" and command.reason == f"rewind {status}"
    # The reset run replays clean and ends as a fresh run of the same inputs does.
    assert Replayer().replay_run(result.run_id).closed_by == "WorkflowCompleted"
    fresh = start("tests.rewind", f"rw-fresh-{status}-{point}", 1, mode)
    _finish(inline, fresh, mode)
    assert fresh.output() == stub.output()
    # Kept prefix and re-run rest together: the same history a fresh run writes.
    assert event_types(stub) == event_types(fresh)


@pytest.mark.parametrize("status", ["completed", "cancelled", "terminated", "waiting"])
def test_first_failure_of_a_run_without_one(inline, status):
    stub, _ = _run_ending(inline, status, f"rw-nofail-{status}")
    assert _refusal(lambda: stub.reset("first_failure")) == "no_failure"
    assert WorkflowRun.objects.filter(instance_id=f"rw-nofail-{status}").count() == 1


def test_what_each_point_keeps(inline):
    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-keep", 1)
    inline.run()
    rewind.FIX["charge"] = True
    types = event_types(stub)
    failed = types.index("ActivityFailed") + 1
    plans = {
        to: stub.reset(to, dry_run=True).reset_point
        for to in ("start", "first_failure", "last_workflow_task")
    }
    assert plans["start"]["kept_events"] == 2  # StartAccepted, WorkflowStarted
    # Before the failure: the charge's ActivityScheduled/Started are left out and
    # issued again (step 2); the first activity's outcome is kept.
    assert plans["first_failure"]["event"] == failed
    assert plans["first_failure"]["kept_events"] == 5
    assert plans["first_failure"]["reissued_steps"] == [2]
    # The last task before the run closed: the one that recorded WorkflowFailed.
    assert plans["last_workflow_task"]["cut"] == types.index("WorkflowFailed") + 1
    # A dry run writes nothing.
    assert WorkflowRun.objects.filter(instance_id="rw-keep").count() == 1
    assert not WorkflowCommand.objects.filter(command_type="reset").exists()

    # The task that closed the run runs again, on a history that still holds the
    # activity's failure: the run fails again the same way.
    again = stub.reset("last_workflow_task")
    inline.run()
    assert stub.refresh().status() == "failed"
    assert Replayer().replay_run(again.run_id).closed_by == "WorkflowFailed"
    assert Invocation.objects.filter(name="charge").count() == 1

    result = stub.reset("first_failure")
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": []}
    # The kept step did not run again; the re-issued charge did.
    assert Invocation.objects.filter(name="step").count() == 1
    assert Invocation.objects.filter(name="charge").count() == 2
    assert WorkflowRun.objects.get(id=result.run_id).run_number == 3
    started = events_of(stub, "WorkflowStarted")[0]
    assert started["workflow_run_id"] == result.run_id
    assert started["reset_from_run_id"] == result.reset_from_run_id


def test_an_event_point_never_splits_a_workflow_task(inline):
    stub = start("tests.rewind", "rw-split", 1)
    inline.run()
    history = stub.history()
    completed = next(e.sequence for e in history if e.event_type == "WorkflowCompleted")
    second = [e.sequence for e in history if e.event_type == "ActivityScheduled"][-1]
    # The task that wrote WorkflowCompleted wrote nothing else: the cut is right there.
    assert stub.reset(completed, dry_run=True).reset_point["cut"] == completed
    plan = stub.reset(second, dry_run=True).reset_point
    assert plan["cut"] == second and plan["kept_events"] == second - 1
    # An input event: the cut stands just before it.
    started = second + 1
    assert history[started - 1].event_type == "ActivityStarted"
    plan = stub.reset(started, dry_run=True).reset_point
    assert plan["cut"] == started and plan["reissued_steps"] == [2]


def test_signals_after_the_point_are_reapplied(inline):
    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-signals", 1, "wait")
    inline.run()
    stub.signal("note", "first")
    inline.run()
    assert stub.refresh().status() == "failed"
    old_id = stub.run_id()
    old_signal = WorkflowSignal.objects.get(run_id=old_id)
    rewind.FIX["charge"] = True

    result = stub.reset("start", reason="replay with the signal")

    assert result.reset_point["reapplied_signals"] == 1
    received = events_of(stub, "SignalReceived")
    assert [e["reapplied_from_signal_id"] for e in received] == [str(old_signal.id)]
    assert event_types(stub) == ["StartAccepted", "WorkflowStarted", "SignalReceived"]
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": ["first"]}
    # The new run has its own signal row; the old run's row is as it was.
    new_signal = WorkflowSignal.objects.get(run_id=result.run_id)
    assert new_signal.status == "applied" and new_signal.signal_name == "note"
    old_signal.refresh_from_db()
    assert old_signal.status == "applied" and str(old_signal.run_id) == old_id
    assert Replayer().replay_run(result.run_id).closed_by == "WorkflowCompleted"


def test_a_signal_kept_but_not_applied_by_the_point_is_applied_by_the_new_run(inline):
    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-kept-signal", 1, "wait")
    inline.run()
    stub.signal("note", "kept")
    inline.run()
    rewind.FIX["charge"] = True
    received = next(e.sequence for e in stub.history() if e.event_type == "SignalReceived")
    result = stub.reset(received + 1)  # keeps the SignalReceived, cuts before its task
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": ["kept"]}
    assert WorkflowSignal.objects.get(run_id=result.run_id).status == "applied"


def test_fork_leaves_the_original_untouched(inline):
    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-fork", 1)
    inline.run()
    rewind.FIX["charge"] = True
    original = WorkflowRun.objects.get(id=stub.run_id())
    before = (original.status, original.updated_at, len(stub.history()))

    result = stub.fork("first_failure", new_instance_id="rw-fork-copy", reason="try the fix")

    assert result.kind == "fork" and result.instance_id == "rw-fork-copy"
    inline.run()
    fork = WorkflowStub.load("rw-fork-copy")
    assert fork.output() == {"first": 2, "second": 20, "notes": []}
    row = WorkflowRun.objects.get(id=result.run_id)
    assert str(row.reset_from_run_id) == stub.run_id() and row.run_number == 1
    original.refresh_from_db()
    assert (original.status, original.updated_at, len(stub.history())) == before
    assert original.reset_to_run_id is None
    assert stub.refresh().run_id() == str(original.id)  # still the instance's run
    assert WorkflowCommand.objects.get(command_type="fork").instance_id == "rw-fork-copy"
    assert events_of(fork, "WorkflowStarted")[0]["workflow_instance_id"] == "rw-fork-copy"
    with pytest.raises(ResetRefusedError) as refused:
        stub.fork("start", new_instance_id="rw-fork-copy")
    assert refused.value.reason == "instance_exists"


def _refusal(call: Any) -> str:
    with pytest.raises(ResetRefusedError) as refused:
        call()
    return refused.value.reason


def test_points_that_cannot_be_resumed_are_refused_with_a_reason(inline):
    stub = start("tests.rewind", "rw-refuse", 1)
    inline.run()
    assert _refusal(lambda: stub.reset(999)) == "unknown_event"
    assert _refusal(lambda: stub.reset("first_failure")) == "no_failure"
    with pytest.raises(InvalidValueError):
        stub.reset("middle")
    with pytest.raises(InvalidInstanceIdError):
        stub.fork("start", new_instance_id="not a valid id!")
    old = WorkflowStub.load_run(stub.run_id())
    stub.reset("start")
    inline.run()
    assert _refusal(lambda: old.reset("start")) == "not_current_run"
    assert old.fork("start", new_instance_id="rw-refuse-fork").run_id  # a fork may

    cancelled, _ = _run_ending(inline, "cancelled", "rw-refuse-cancelled")
    last = cancelled.history()[-1].sequence
    assert _refusal(lambda: cancelled.reset(last)) == "after_close_request"
    assert WorkflowRun.objects.filter(instance_id="rw-refuse-cancelled").count() == 1


def test_a_run_that_continued_as_new_is_refused(inline):
    looper = start("tests.looper", "rw-looper", 2)
    inline.run()
    first = looper.run_id()
    looper.signal("tick")
    inline.run()
    assert looper.refresh().run_id() != first
    assert _refusal(lambda: WorkflowStub.load_run(first).reset("start")) == "continued_as_new"
    assert (
        _refusal(lambda: WorkflowStub.load_run(first).fork("start", new_instance_id="rw-lf"))
        == "continued_as_new"
    )


def test_children_in_flight_and_child_runs_are_refused(inline):
    parent = start("tests.parent", "rw-parent", "policy")
    inline.run()
    assert _refusal(lambda: parent.reset("last_workflow_task")) == "child_in_flight"
    assert parent.reset("start", dry_run=True).reset_point["kept_events"] == 2
    child_row = WorkflowRun.objects.exclude(instance_id="rw-parent").get(
        parent_run_id=uuid.UUID(parent.run_id())
    )
    child = WorkflowStub.load_run(child_row.id)
    assert _refusal(lambda: child.reset("start")) == "child_run"


def test_the_management_command(inline):
    from io import StringIO

    from django.core.management import CommandError, call_command

    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-cli", 1)
    inline.run()
    rewind.FIX["charge"] = True
    run_id = stub.run_id()

    out = StringIO()
    call_command("workflow_reset", run_id, "--to", "first_failure", "--dry-run", stdout=out)
    assert "would start a new run of 'rw-cli'" in out.getvalue()
    assert "re-issued steps [2]" in out.getvalue()
    assert WorkflowRun.objects.filter(instance_id="rw-cli").count() == 1

    with pytest.raises(CommandError, match="refused: unknown_event"):
        call_command("workflow_reset", run_id, "--event", "999", stdout=StringIO())
    with pytest.raises(CommandError, match="go together"):
        call_command("workflow_reset", run_id, "--fork", stdout=StringIO())
    with pytest.raises(CommandError, match="not a run id"):
        call_command("workflow_reset", "nope", stdout=StringIO())

    out = StringIO()
    call_command(
        "workflow_reset",
        run_id,
        "--to",
        "start",
        "--fork",
        "--instance-id",
        "rw-cli-fork",
        "--reason",
        "try it",
        "--json",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    assert report["kind"] == "fork" and report["instance_id"] == "rw-cli-fork"

    out = StringIO()
    call_command("workflow_reset", run_id, "--event", str(_event_point(stub)), stdout=out)
    assert "started a new run of 'rw-cli'" in out.getvalue()
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": []}
    command = WorkflowCommand.objects.get(command_type="reset")
    assert command.source == "cli" and command.run_id == uuid.UUID(run_id)
    assert WorkflowStub.load("rw-cli-fork").output() == {"first": 2, "second": 20, "notes": []}


def test_an_open_run_waiting_on_a_timer_is_terminated_and_its_timer_issued_again(inline):
    from durable_workflow.models import Timer

    stub = start("tests.sleeper", "rw-timer", 3600)
    inline.run()
    old_id = stub.run_id()
    assert Timer.objects.get(run_id=old_id).status == "pending"

    result = stub.reset("last_workflow_task", reason="new deadline code")

    assert result.terminated_old_run and result.reset_point["reissued_steps"] == [1]
    old = WorkflowStub.load_run(old_id)
    assert old.status() == "terminated"
    assert event_types(old)[-3:] == ["TerminateRequested", "TimerCancelled", "WorkflowTerminated"]
    assert Timer.objects.get(run_id=old_id).status == "cancelled"
    inline.run()  # the new run's first task starts the timer again, as its own
    assert Timer.objects.get(run_id=result.run_id).status == "pending"
    assert stub.refresh().status() == "waiting"
    assert event_types(stub) == ["StartAccepted", "WorkflowStarted", "TimerScheduled"]


def test_a_run_whose_workflow_task_is_running_is_refused(inline):
    from datetime import timedelta

    from durable_workflow import clock
    from durable_workflow.models import Task

    stub = start("tests.rewind", "rw-busy", 1, "wait")
    inline.run()
    stub.signal("note", "x")  # a ready workflow task: a worker claims it
    Task.objects.filter(run_id=stub.run_id(), task_type="workflow", status="ready").update(
        status="leased", lease_expires_at=clock.now() + timedelta(minutes=5)
    )
    assert _refusal(lambda: stub.reset("start")) == "workflow_task_running"
    assert WorkflowRun.objects.filter(instance_id="rw-busy").count() == 1


def test_an_archived_run_can_be_reset_and_the_new_run_is_not_archived(inline):
    stub = start("tests.rewind", "rw-archived", 1)
    inline.run()
    stub.archive("done with it")
    old_id = stub.run_id()
    assert WorkflowStub.load_run(old_id).archived_at() is not None
    last = stub.history()[-1]
    assert last.event_type == "WorkflowArchived"
    # The last event: the cut backs off over the close, to the task that closed the run.
    assert stub.reset(last.sequence, dry_run=True).reset_point["cut"] == last.sequence - 1
    result = stub.reset("start", reason="audit asks for a re-run")
    inline.run()
    assert stub.refresh().completed() and stub.archived_at() is None
    assert WorkflowRun.objects.get(id=result.run_id).archived_at is None
