"""Child workflows, all/parallel, select, run_async and continue-as-new."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings

import durable_workflow as dw
from durable_workflow import WorkflowStub, clock
from durable_workflow.models import ChildCall, HistoryEvent, WorkflowRun
from tests.integration.helpers import event_types, events_of, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_child_workflow_result_and_handle(inline):
    stub = start("tests.parent", "parent-1", "simple")
    inline.run()
    stub.refresh()
    out = stub.output()
    assert out["result"] == {"echo": 42}
    child_run = WorkflowRun.objects.get(parent_run_id=stub.run_id())
    assert out["child_id"] == child_run.instance_id == f"{stub.run_id()}:child:1"
    assert out["run"] == str(child_run.id)
    assert child_run.status == "completed" and child_run.parent_sequence == 1
    types = event_types(stub)
    assert types[2:4] == ["ChildWorkflowScheduled", "ChildRunStarted"]
    assert "ChildRunCompleted" in types
    call = ChildCall.objects.get(parent_run_id=stub.run_id())
    assert call.status == "completed" and call.outcome_recorded


def test_child_failure_is_caught_by_the_parent(inline):
    stub = start("tests.parent", "parent-2", "catch")
    inline.run()
    out = stub.refresh().output()
    assert out == {"caught": "child refused 1", "child_failed": True}
    assert "ChildRunFailed" in event_types(stub)
    assert "FailureHandled" in event_types(stub)


@pytest.mark.parametrize("how", ["terminate", "cancel"])
def test_terminated_or_cancelled_child_surfaces_as_its_own_type(inline, how):
    stub = start("tests.parent", f"parent-3-{how}", "cancelled")
    inline.run()
    child = WorkflowStub.load(f"{stub.run_id()}:child:1")
    getattr(child, how)("ops")
    inline.run()
    assert stub.refresh().output() == f"child {how}{'d' if how == 'terminate' else 'led'}"
    expected = "ChildRunTerminated" if how == "terminate" else "ChildRunCancelled"
    assert expected in event_types(stub)


@pytest.mark.parametrize(
    ("policy", "child_status", "outcome"),
    [
        ("abandon", "waiting", "abandoned"),
        ("terminate", "terminated", "terminated"),
        ("request_cancel", "cancelled", "cancelled"),
    ],
)
def test_parent_close_policies(inline, policy, child_status, outcome):
    stub = start("tests.parent", f"parent-policy-{policy}", "policy-async", policy)
    inline.run()
    clock.advance(dt.timedelta(seconds=6))
    inline.run()  # the timer fires; all() still waits for the child -> terminate the parent
    stub.terminate("closing parent")
    inline.run()
    child = WorkflowRun.objects.get(parent_run_id=stub.run_id())
    assert child.status == child_status
    applied = events_of(stub, "ParentClosePolicyApplied")
    assert len(applied) == 1
    assert applied[0]["parent_close_policy"] == policy and applied[0]["outcome"] == outcome


def test_fanout_all_returns_results_in_input_order(inline):
    stub = start("tests.fanout", "fanout-1", 25)
    inline.run()
    assert stub.refresh().output() == list(range(25))
    scheduled = events_of(stub, "ActivityScheduled")
    assert [e["parallel_group_index"] for e in scheduled] == list(range(25))
    assert {e["parallel_group_id"] for e in scheduled} == {"parallel-calls:1:25"}
    assert {e["parallel_group_kind"] for e in scheduled} == {"activity"}
    # one workflow task scheduled the whole group
    first_completed = event_types(stub).index("ActivityCompleted")
    assert event_types(stub)[2:first_completed].count("ActivityScheduled") == 25


def test_failure_in_a_group_raises_the_earliest(inline):
    stub = start("tests.fanout", "fanout-2", 5, 2)
    inline.run()
    stub.refresh()
    assert stub.failed()
    assert stub.history()[-1].payload["message"] == "attempt 1 declined"


def test_nested_groups_keep_their_shape_and_path(inline):
    stub = start("tests.nested", "nested-1")
    inline.run()
    assert stub.refresh().output() == [1, [2, 6], {"echo": 11}]
    scheduled = events_of(stub, "ActivityScheduled")
    paths = [e["parallel_group_path"] for e in scheduled]
    assert paths[0] == ["parallel-calls:1:4"]
    assert paths[1] == ["parallel-calls:1:4", "group:2:2"]
    kinds = {e["parallel_group_kind"] for e in scheduled}
    assert kinds == {"mixed"}


def test_nested_group_with_a_failing_member(inline):
    stub = start("tests.nested", "nested-2", True)
    inline.run()
    assert stub.refresh().output() == "failed: attempt 1 declined"


def test_fanout_limits_are_checked_before_anything_is_scheduled(inline):
    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {"command_batch_size": 10}}):
        stub = start("tests.fanout", "fanout-limit", 11)
        inline.run()
    stub.refresh()
    assert stub.failed()
    final = stub.history()[-1].payload
    assert final["failure_category"] == "structural_limit"
    assert final["structural_limit_kind"] == "command_batch_size"
    assert final["structural_limit_value"] == 11
    assert final["structural_limit_configured"] == 10
    assert "ActivityScheduled" not in event_types(stub)


def test_pending_activity_limit(inline):
    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {"pending_activity_count": 3}}):
        stub = start("tests.fanout", "fanout-pending", 4)
        inline.run()
    assert stub.refresh().history()[-1].payload["structural_limit_kind"] == "pending_activity_count"


@pytest.mark.parametrize(("timeout", "winner"), [(3600, "work"), (0, "deadline")])
def test_select_between_an_activity_and_a_timer(inline, timeout, winner):
    stub = start("tests.selector", f"select-{winner}", timeout)
    inline.run()
    out = stub.refresh().output()
    assert out["winner"] == winner
    resolved = events_of(stub, "SelectionResolved")
    assert len(resolved) == 1 and resolved[0]["member_key"] == winner
    cancelled = events_of(stub, "SelectionOperationCancelled")
    assert {c["member_key"] for c in cancelled} <= {"work", "deadline", "manual"}
    if winner == "work":
        assert out["value"] == 42
        assert sorted(out["others"]) == ["cancelled signal", "cancelled timer"]
    else:
        assert out["value"] is None
        assert "cancelled activity" in out["others"]


def test_select_replays_to_the_same_winner_despite_later_completions(inline):
    stub = start("tests.selector", "select-replay", 3600)
    inline.run()
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history
    from tests.testapp.composition import Selector

    runtime = WorkflowRuntime(
        factory=lambda: Selector._dw_instantiate(runtime),
        workflow_id="select-replay",
        run_id=stub.run_id(),
    )
    runtime.enter_query_mode()
    runtime.feed(history.load_history(stub.run_id()))
    from durable_workflow.codec import envelope

    assert envelope.decode(runtime.closed.result) == stub.refresh().output()


def test_run_async_branches(inline):
    stub = start("tests.async-branches", "async-1")
    inline.run()
    assert stub.refresh().output() == [101, [2, 12]]


def test_continue_as_new_chain_with_signals(inline):
    stub = start("tests.looper", "loop-1", 5)
    first_run = stub.run_id()
    for _ in range(5):
        stub.signal("tick")
        inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    out = stub.output()
    assert out["ticks"] == 5 and out["run_id"] == stub.run_id()
    runs = list(WorkflowRun.objects.filter(instance_id="loop-1").order_by("run_number"))
    assert [r.run_number for r in runs] == [1, 2, 3, 4, 5]
    assert [r.closed_reason for r in runs] == ["continued"] * 4 + ["completed"]
    assert all(r.status == "completed" for r in runs)
    assert runs[1].continued_from_id == runs[0].id and str(runs[0].id) == first_run
    old = WorkflowStub.load_run(first_run)
    assert event_types(old)[-1] == "WorkflowContinuedAsNew"
    assert old.status() == "completed" and old.closed_reason() == "continued"


def test_signals_sent_before_continue_as_new_follow_the_run(inline):
    stub = start("tests.looper", "loop-2", 3)
    for _ in range(3):
        stub.signal("tick")  # all three land on run 1 before any task runs
    inline.run()
    assert stub.refresh().output()["ticks"] == 3
    carried = HistoryEvent.objects.filter(
        run__instance_id="loop-2",
        event_type="SignalReceived",
        payload__has_key="carried_from_run_id",
    )
    assert carried.count() >= 1


def test_history_budget_suggests_continue_as_new(inline):
    with override_settings(DURABLE_WORKFLOW={"CONTINUE_AS_NEW_EVENT_THRESHOLD": 20}):
        stub = start("tests.budget", "budget-1")
        inline.run()
    out = stub.refresh().output()
    assert out == {"steps": 6, "length": 20}  # 2 start events + 3 per activity step
    assert Invocation.objects.filter(name="add").count() == 6


class TwoTimers(dw.Workflow):
    type_key = "tests.two-timers"

    def handle(self) -> list:
        return dw.all([lambda: dw.timer(100), lambda: dw.timer(200)])


class TwoChildren(dw.Workflow):
    type_key = "tests.two-children"

    def handle(self) -> list:
        return dw.all(
            [lambda: dw.child("tests.child-echo", 1), lambda: dw.child("tests.child-echo", 2)]
        )


@pytest.mark.parametrize(
    ("workflow", "kind"),
    [("tests.two-timers", "pending_timer_count"), ("tests.two-children", "pending_child_count")],
)
def test_pending_timer_and_child_limits_fail_the_run(inline, workflow, kind):
    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {kind: 1}}):
        stub = start(workflow, f"limit-{kind}")
        inline.run()
    stub.refresh()
    assert stub.failed()
    final = stub.history()[-1].payload
    assert (final["structural_limit_kind"], final["structural_limit_configured"]) == (kind, 1)


def test_limits_warn_at_eighty_percent(inline, caplog):
    import logging

    with (
        override_settings(
            DURABLE_WORKFLOW={
                "STRUCTURAL_LIMITS": {"command_batch_size": 100, "pending_activity_count": 5}
            }
        ),
        caplog.at_level(logging.WARNING, logger="durable_workflow"),
    ):
        stub = start("tests.fanout", "limit-warn", 4)
        inline.run()
    assert stub.refresh().output() == [0, 1, 2, 3]
    assert any("pending_activity_count" in r.getMessage() for r in caplog.records)


def test_continue_as_new_applies_no_parent_close_policy(inline):
    """Issue 23, item 3: the instance goes on, so its open children are left running,
    not cancelled or terminated, when a run hands over to the next."""
    stub = start("tests.hands-over-a-child", "handover-1", 1)
    inline.run()
    child_id = stub.refresh().output()
    assert stub.status() == "completed"
    (started,) = events_of(stub, "WorkflowStarted")
    first = WorkflowStub.load_run(started["continued_from_run_id"])
    assert "ParentClosePolicyApplied" not in event_types(first)
    assert "ParentClosePolicyFailed" not in event_types(first)
    child = WorkflowStub.load(child_id)
    assert child.status() == "waiting"  # terminate was not applied, by either run
    child.signal("go", "later")
    inline.run()
    assert child.refresh().output() == {"value": "x", "go": "later"}


def test_a_predicate_wait_is_a_group_member(inline):
    stub = start("tests.predicate-members", "predicate-members")
    inline.run()
    assert stub.refresh().running()
    stub.signal("go")
    inline.run()
    assert stub.refresh().output() == {"select": "go", "all": [True, None]}
