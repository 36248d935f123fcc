"""Inputs that reach a run after its body decided to continue as new go to the next run.

Issue 21, defect 1: two signals in one workflow task, the first makes the body
continue as new, and the second was handed to the closing run's handler (and
counted as consumed), so the next run never saw it.
"""

from __future__ import annotations

import pytest

from durable_workflow.models import WorkflowMessage, WorkflowRun, WorkflowSignal, WorkflowUpdate
from tests.integration.helpers import events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def _runs(instance_id: str) -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(instance_id=instance_id).order_by("run_number"))


def test_signals_after_the_decision_reach_the_next_run_in_order(inline):
    stub = start("tests.patterns.carry", "carry-signals", [], 3)
    inline.run()
    for item in ("a", "b", "c"):
        stub.signal("add", item)  # all three reach run 1 in one workflow task
    inline.run()
    assert stub.refresh().output() == ["a", "b", "c"]
    runs = _runs("carry-signals")
    assert [r.closed_reason for r in runs] == ["continued", "continued", "completed"]
    applied = {s.signal_name + ":" + str(s.run_id) for s in WorkflowSignal.objects.all()}
    assert len(applied) == 3  # each signal applied by exactly one run, a different one each
    assert set(WorkflowSignal.objects.values_list("status", flat=True)) == {"applied"}


def test_updates_after_the_decision_reach_the_next_run(inline):
    stub = start("tests.patterns.carry", "carry-updates", [], 2)
    inline.run()
    first = stub.submit_update("push", "u1")
    second = stub.submit_update("push", "u2")
    inline.run()
    assert stub.refresh().output() == ["u1", "u2"]
    assert stub.inspect_update(first.update_id).result == "u1"
    assert stub.inspect_update(second.update_id).result == "u2"
    runs = _runs("carry-updates")
    rows = {u.update_name + str(u.result): u.run_id for u in WorkflowUpdate.objects.all()}
    assert sorted(rows.values()) == sorted(r.id for r in runs)


def test_updates_and_signals_keep_their_arrival_order(inline):
    stub = start("tests.patterns.carry", "carry-mixed", [], 3)
    inline.run()
    stub.submit_update("push", "u1")
    stub.submit_update("push", "u2")
    stub.signal("add", "s1")
    inline.run()
    assert stub.refresh().output() == ["u1", "u2", "s1"]
    last = stub.history()
    carried = [e.event_type for e in last if e.payload.get("carried_from_run_id")]
    assert carried == ["SignalReceived"]
    second = WorkflowStubRun(_runs("carry-mixed")[1].id)
    assert [e["update_name"] for e in events_of(second, "UpdateAccepted")] == ["push"]


def test_messages_after_the_decision_reach_the_next_run_in_stream_order(inline):
    stub = start("tests.patterns.carry", "carry-messages", [], 2)
    inline.run()
    stub.signal("add", "s1")  # consumed by run 1, which then continues as new
    stub.send_message("requests", "m1")
    stub.signal("add", "s2")
    stub.send_message("requests", "m2")
    inline.run()
    assert stub.refresh().output() == ["s1", "s2"]
    first, second = _runs("carry-messages")
    history = WorkflowStubRun(second.id).history()
    carried = [e.payload for e in history if e.payload.get("carried_from_run_id")]
    assert {p["carried_from_run_id"] for p in carried} == {str(first.id)}
    # A stream keeps its own order (the run records a message when a workflow task sees it,
    # so its place among signals is the old run's history order, not the send order).
    assert [p.get("payload_reference") for p in carried if "message_id" in p] == ["m1", "m2"]
    assert [p["signal_name"] for p in carried if "signal_id" in p] == ["add"]  # s2
    pending = WorkflowMessage.objects.filter(target_instance_id="carry-messages")
    assert {(m.payload_reference, m.target_run_id, m.status) for m in pending} == {
        ("m1", second.id, "pending"),
        ("m2", second.id, "pending"),
    }


def WorkflowStubRun(run_id):  # noqa: N802
    from durable_workflow import WorkflowStub

    return WorkflowStub.load_run(run_id)
