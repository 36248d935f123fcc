"""The reset planner (engine.rewind) on histories built by hand: no database."""

from __future__ import annotations

from typing import Any

import pytest

from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.rewind import RefusedPoint, plan, unapplied_signals


def history(*rows: tuple[str, dict[str, Any]]) -> list[HistoryEvent]:
    base = [("StartAccepted", {}), ("WorkflowStarted", {"workflow_run_id": "old"})]
    return [
        HistoryEvent(sequence=n, event_type=kind, payload=payload)
        for n, (kind, payload) in enumerate([*base, *rows], start=1)
    ]


TWO_ACTIVITIES = history(
    ("ActivityScheduled", {"sequence": 1}),  # 3
    ("ActivityStarted", {"sequence": 1}),  # 4
    ("ActivityCompleted", {"sequence": 1}),  # 5
    ("SideEffectRecorded", {"sequence": 2}),  # 6
    ("ActivityScheduled", {"sequence": 3}),  # 7
    ("ActivityStarted", {"sequence": 3}),  # 8
    ("ActivityFailed", {"sequence": 3}),  # 9
    ("WorkflowFailed", {}),  # 10
)


def refusal(events: list[HistoryEvent], to: Any, **kwargs: Any) -> str:
    with pytest.raises(RefusedPoint) as refused:
        plan(events, to, **kwargs)
    return refused.value.reason


def test_a_point_inside_a_task_backs_off_to_where_the_task_began():
    # Events 6 and 7 were written by the task that followed the first outcome.
    for point in (6, 7):
        assert plan(TWO_ACTIVITIES, point).cut == 6
    assert plan(TWO_ACTIVITIES, 5).cut == 5  # an input: the cut stands before it


def test_open_steps_are_left_out_and_issued_again():
    planned = plan(TWO_ACTIVITIES, "first_failure")
    assert planned.event == 9 and planned.cut == 9
    assert planned.reissued_steps == (3,)
    assert [e.sequence for e in planned.kept] == [1, 2, 3, 4, 5, 6]


def test_named_points():
    assert plan(TWO_ACTIVITIES, "start").cut == 3
    assert plan(TWO_ACTIVITIES, "last_workflow_task").cut == 10
    open_run = TWO_ACTIVITIES[:5]
    assert plan(open_run, "last_workflow_task").cut == 6  # all of it
    assert plan(open_run, "first_failure", parked=True).cut == 6
    assert refusal(open_run, "first_failure") == "no_failure"


def test_signals_after_the_cut_are_reapplied_and_kept_unapplied_ones_found():
    events = history(
        ("SignalReceived", {"signal_id": "a"}),  # 3
        ("SignalApplied", {"signal_id": "a", "sequence": 1}),  # 4
        ("SignalReceived", {"signal_id": "b"}),  # 5
        ("SignalReceived", {"signal_id": "c"}),  # 6
    )
    planned = plan(events, 6)
    assert [e.payload["signal_id"] for e in planned.reapplied] == ["c"]
    assert [e.payload["signal_id"] for e in unapplied_signals(planned.kept)] == ["b"]
    assert [e.payload["signal_id"] for e in plan(events, "start").reapplied] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("rows", "to", "reason"),
    [
        ((), 99, "unknown_event"),
        ((), "middle", "unknown_point"),
        ((("WorkflowContinuedAsNew", {}),), "start", "continued_as_new"),
        ((("CancelRequested", {}), ("WorkflowCancelled", {})), 4, "after_close_request"),
        (
            (
                ("ChildWorkflowScheduled", {"sequence": 1}),
                ("ChildRunStarted", {"sequence": 1}),
                ("SignalReceived", {}),
            ),
            5,
            "child_in_flight",
        ),
        ((("UpdateAccepted", {"update_id": "u"}), ("SignalReceived", {})), 4, "update_in_flight"),
        ((("MessageReceived", {}), ("SignalReceived", {})), 4, "message_in_prefix"),
        ((("WorkflowTimedOut", {}), ("WorkflowArchived", {})), 4, "after_close"),
    ],
)
def test_refusals(rows, to, reason):
    assert refusal(history(*rows), to) == reason
