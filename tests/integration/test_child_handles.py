"""``dw.start_child``: a handle once the child started; its result later, signals, cancel."""

from __future__ import annotations

import pytest

from durable_workflow import ChildWorkflowOptions, InvalidInstanceIdError, WorkflowStub
from durable_workflow.models import WorkflowRun
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_handle_knows_the_child_before_it_finishes(inline):
    stub = start("tests.patterns.starts-children", "h-result", "result")
    inline.run()
    out = stub.refresh().output()
    child_id, child_run, done_at_start = out["known"]
    assert child_id == f"{stub.run_id()}:child:1"
    assert child_run == str(WorkflowRun.objects.get(instance_id=child_id).id)
    assert done_at_start is False
    assert out["value"] == {"echo": 42} and out["done"] is True
    types = event_types(stub)
    assert types.index("ChildRunStarted") < types.index("ChildRunCompleted")


def test_start_child_goes_on_in_the_same_workflow_task(inline):
    stub = start("tests.patterns.starts-children", "h-signal", "signal")
    inline.run()
    assert stub.refresh().output() == {"value": "x", "go": "now"}
    sent = events_of(stub, "ExternalSignalSent")
    started = events_of(stub, "ChildRunStarted")
    assert sent[0]["outcome"] == "signal_received"
    assert sent[0]["target_instance_id"] == f"{stub.run_id()}:child:1"
    assert sent[0]["target_run_id"] == started[0]["child_workflow_run_id"]
    # The start, its ChildRunStarted and the signal: one workflow task, one timestamp.
    history = {e.event_type: e.recorded_at for e in stub.history()}
    assert history["ChildWorkflowScheduled"] == history["ExternalSignalSent"]


def test_cancelling_through_the_handle(inline):
    stub = start("tests.patterns.starts-children", "h-cancel", "cancel")
    inline.run()
    assert stub.refresh().output() == "child cancelled"
    [requested] = events_of(stub, "ExternalCancelRequested")
    assert (requested["outcome"], requested["reason"]) == ("cancelled", "no longer needed")
    child = WorkflowStub.load(requested["target_instance_id"])
    assert child.status() == "cancelled"
    assert "ChildRunCancelled" in event_types(stub)


def test_handles_are_members_of_select_and_all(inline):
    stub = start("tests.patterns.starts-children", "h-select", "select")
    inline.run()
    assert stub.refresh().output() == ["fast", {"echo": 2}, "late"]
    [resolved] = events_of(stub, "SelectionResolved")
    assert resolved["member_key"] == "fast" and resolved["operation_kind"] == "child"
    everything = start("tests.patterns.starts-children", "h-all", "all")
    inline.run()
    assert everything.refresh().status() == "waiting"  # the timer member is still due


def test_the_parent_chooses_the_child_id(inline):
    stub = start("tests.patterns.starts-children", "h-named", "named")
    inline.run()
    assert stub.refresh().output() == ["h-named-named", {"echo": 6}]
    assert WorkflowStub.load("h-named-named").completed()
    [scheduled] = events_of(stub, "ChildWorkflowScheduled")
    assert scheduled["child_instance_id"] == "h-named-named"


def test_a_taken_child_id_is_refused_with_its_reason(inline):
    stub = start("tests.patterns.starts-children", "h-taken", "taken")
    inline.run()
    assert stub.refresh().output() == ["rejected_duplicate", "instance_already_started"]
    [refused] = events_of(stub, "ChildWorkflowStartRejected")
    assert refused["rejection_reason"] == "instance_already_started"
    assert WorkflowRun.objects.filter(instance_id="h-taken-named").count() == 1
    assert "FailureHandled" in event_types(stub)


@pytest.mark.parametrize("bad", ["", "has space", "x" * 192, "nul\x00"])
def test_a_child_id_is_validated_before_anything_is_recorded(bad):
    with pytest.raises(InvalidInstanceIdError):
        ChildWorkflowOptions(instance_id=bad)
