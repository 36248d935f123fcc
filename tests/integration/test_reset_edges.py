"""Reset at the edges of an instance's tree of runs (SQLite and PostgreSQL): a parent
whose child is still running, a child run, and an older run of an instance whose
newer run is open. Each is either done correctly or refused with a typed reason."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from durable_workflow import ResetRefusedError, WorkflowStub
from durable_workflow.models import WorkflowRun
from tests.integration.helpers import event_types, start

pytestmark = pytest.mark.django_db(transaction=True)


def _refusal(call: Any) -> str:
    with pytest.raises(ResetRefusedError) as refused:
        call()
    return refused.value.reason


def _children_of(run_id: str) -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(parent_run_id=uuid.UUID(run_id)))


@pytest.mark.parametrize(
    ("policy", "old_child_status"),
    [("abandon", "waiting"), ("terminate", "terminated"), ("request_cancel", "cancelled")],
)
def test_a_parent_whose_child_is_running(inline, policy, old_child_status):
    parent = start("tests.parent", f"rw-kid-{policy}", "policy", policy)
    inline.run()
    old_id = parent.run_id()
    (old_child,) = _children_of(old_id)
    assert old_child.status == "waiting"  # on its hour-long timer

    # A point that keeps the child's start would leave the new run waiting on a
    # child it does not own: refused.
    assert _refusal(lambda: parent.reset("last_workflow_task")) == "child_in_flight"
    # Before the child: the old run is terminated (its child follows the parent
    # close policy) and the new run starts a child of its own.
    result = parent.reset("start", reason="new child arguments")
    inline.run()

    assert result.terminated_old_run
    old_child.refresh_from_db()
    assert old_child.status == old_child_status
    (new_child,) = _children_of(result.run_id)
    assert new_child.instance_id != old_child.instance_id
    assert new_child.status == "waiting"
    assert event_types(parent) == [
        "StartAccepted",
        "WorkflowStarted",
        "ChildWorkflowScheduled",
        "ChildRunStarted",
    ]


def test_a_child_run_is_refused_and_its_fork_is_a_run_of_its_own(inline):
    parent = start("tests.parent", "rw-kid-fork", "policy")
    inline.run()
    (child_row,) = _children_of(parent.run_id())
    child = WorkflowStub.load_run(child_row.id)

    refused = _refusal(lambda: child.reset("start"))
    assert refused == "child_run"
    with pytest.raises(ResetRefusedError, match="reset the parent instead"):
        child.reset("start")
    assert WorkflowRun.objects.filter(instance_id=child_row.instance_id).count() == 1

    # A fork is a new instance: no parent, nothing reported to the parent's run.
    result = child.fork("start", new_instance_id="rw-kid-copy", reason="look at it alone")
    inline.run()
    copy = WorkflowRun.objects.get(id=result.run_id)
    assert copy.parent_run_id is None and copy.status == "waiting"
    child_row.refresh_from_db()
    assert child_row.status == "waiting" and child_row.reset_to_run_id is None
    assert parent.refresh().status() == "waiting"


@pytest.mark.parametrize("how", ["reset", "fork"])
def test_an_older_run_while_a_newer_run_is_open(inline, how):
    stub = start("tests.rewind", f"rw-older-{how}", 1, "wait")
    inline.run()
    stub.cancel("wrong amount")
    inline.run()
    assert stub.refresh().status() == "cancelled"
    old_id = stub.run_id()
    newer = stub.reset("start", reason="the first rewind")
    inline.run()
    assert stub.refresh().status() == "waiting"  # on its note, like the first run
    older = WorkflowStub.load_run(old_id)

    if how == "reset":
        # Resetting the older run would leave two open runs, or terminate the newer
        # one behind the operator's back: refused, nothing written.
        assert _refusal(lambda: older.reset("last_workflow_task")) == "not_current_run"
        with pytest.raises(ResetRefusedError, match=r"reset \(or fork\) from that one"):
            older.reset("start", dry_run=True)
        assert WorkflowRun.objects.filter(instance_id=f"rw-older-{how}").count() == 2
    else:  # a fork leaves both runs of the instance as they are
        forked = older.fork("start", new_instance_id=f"rw-older-{how}-copy")
        inline.run()
        assert forked.reset_from_run_id == old_id
        assert WorkflowStub.load(forked.instance_id).status() == "waiting"
    assert WorkflowRun.objects.get(id=newer.run_id).status == "waiting"
    assert WorkflowRun.objects.get(id=old_id).reset_to_run_id == uuid.UUID(newer.run_id)
    assert stub.refresh().run_id() == newer.run_id
    stub.signal("note", "go")
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": ["go"]}


def test_a_child_with_a_chosen_instance_id_is_not_started_again(inline):
    parent = start("tests.patterns.starts-children", "rw-named", "named")
    inline.run()
    assert parent.refresh().output() == ["rw-named-named", {"echo": 6}]

    result = parent.reset("start", reason="run it again")
    inline.run()

    # Instance ids are never reused: the new run's start of the child is refused
    # (the body did not catch it), and the child that ran is untouched.
    assert "ChildWorkflowStartRejected" in event_types(parent)
    assert parent.refresh().run_id() == result.run_id and not parent.completed()
    assert WorkflowRun.objects.filter(instance_id="rw-named-named").count() == 1
