"""The greenlet replay runtime, driven without a database."""

from __future__ import annotations

import pytest

import durable_workflow as dw
from durable_workflow import (
    Activity,
    NonDeterminismError,
    NotInWorkflowError,
    UnresolvedFailureError,
    Workflow,
)
from tests.unit.harness import T0, Harness

LOG: list[str] = []


class Charge(Activity):
    type_key = "unit.charge"


class Ship(Activity):
    type_key = "unit.ship"


class Declined(Exception):
    pass


class ThreeSteps(Workflow):
    type_key = "unit.three-steps"

    def handle(self, order: str) -> list:
        a = dw.activity(Charge, order)
        dw.timer(30)
        b = dw.activity(Ship, order)
        return [a, b, dw.now().isoformat()]


class Catches(Workflow):
    type_key = "unit.catches"

    def handle(self) -> str:
        try:
            dw.activity(Charge, "x")
        except Declined as exc:
            return f"caught {exc}"
        return "no failure"


class Unwinds(Workflow):
    type_key = "unit.unwinds"

    def handle(self) -> None:
        try:
            dw.activity(Charge, "x")
        finally:
            LOG.append("finally ran")
            dw.activity(Ship, "y")  # must not be recorded while unwinding


def drive_three_steps(warm: bool) -> Harness:
    h = Harness(ThreeSteps, "o-1")
    h.task(warm=warm)
    h.complete(1, "charged")
    h.task(warm=warm)
    h.fire(2)
    h.task(warm=warm)
    h.complete(3, "shipped")
    h.task(warm=warm)
    return h


def test_each_task_issues_exactly_the_next_command():
    h = Harness(ThreeSteps, "o-1")
    h.task()
    assert h.types()[-1] == "ActivityScheduled"
    h.complete(1, "charged")
    h.task()
    assert h.types()[-1] == "TimerScheduled"
    assert h.events[-1].payload["delay_seconds"] == 30
    h.fire(2)
    h.task()
    assert h.types()[-1] == "ActivityScheduled"
    assert h.events[-1].payload["activity_type"] == "unit.ship"
    h.complete(3, "shipped")
    h.task()
    assert h.result()[:2] == ["charged", "shipped"]


def test_replaying_a_finished_history_issues_nothing_new():
    h = drive_three_steps(warm=False)
    runtime = h.runtime()
    runtime.feed(h.events[:-1])  # everything but WorkflowCompleted
    assert runtime.take_commands() == []
    assert runtime.closed is not None


def test_warm_and_cold_execution_give_identical_histories():
    cold, warm = drive_three_steps(False), drive_three_steps(True)
    assert cold.types() == warm.types()
    assert [e.payload for e in cold.events] == [e.payload for e in warm.events]
    assert cold.result() == warm.result()


def test_now_is_the_time_of_the_last_consumed_input():
    h = drive_three_steps(False)
    shipped_at = [e for e in h.events if e.event_type == "ActivityCompleted"][-1].recorded_at
    assert h.result()[2] == shipped_at.isoformat()
    assert shipped_at > T0


def test_a_different_command_kind_at_a_recorded_step_is_reported():
    h = Harness(ThreeSteps, "o-1")
    h.task()
    h.complete(1, "charged")
    h.task()  # step 2 = timer recorded
    h.events[-1] = h.events[-1].__class__(
        h.events[-1].sequence, "SideEffectRecorded", {"sequence": 2, "result": None}, T0
    )
    with pytest.raises(NonDeterminismError) as info:
        h.task()
    assert (info.value.step, info.value.recorded, info.value.requested) == (
        2,
        "SideEffectRecorded",
        "TimerScheduled",
    )
    assert "step 2" in str(info.value)


def test_a_different_activity_type_is_reported():
    h = Harness(ThreeSteps, "o-1")
    h.add("ActivityScheduled", sequence=1, activity_type="unit.refund")
    with pytest.raises(NonDeterminismError) as info:
        h.task()
    assert info.value.recorded == "ActivityScheduled(unit.refund)"
    assert info.value.requested == "ActivityScheduled(unit.charge)"


def test_a_recorded_step_the_code_never_reaches_is_reported():
    h = Harness(ThreeSteps, "o-1")
    h.task()
    h.complete(1, "charged")
    h.add("SideEffectRecorded", sequence=5, result=None)
    with pytest.raises(NonDeterminismError, match="never reached"):
        h.task()


def test_a_failure_is_rebuilt_as_the_original_class_and_handled_once():
    h = Harness(Catches)
    h.task()
    h.fail(1, f"{__name__}.Declined", "card declined")
    h.task()
    assert h.types().count("FailureHandled") == 1
    assert h.result() == "caught card declined"
    # replaying the completed history does not record FailureHandled again
    runtime = h.runtime()
    runtime.feed(h.events)
    assert runtime.take_commands() == []


def test_an_unresolvable_failure_class_stops_the_replay():
    """Issue 23, item 2: no silent ``ActivityFailed`` for a class nothing resolves to."""
    h = Harness(Catches)
    h.task()
    h.fail(1, "gone.module.Declined", "card declined")
    with pytest.raises(UnresolvedFailureError) as info:
        h.task()
    assert info.value.exception_class == "gone.module.Declined"
    assert "EXCEPTION_CLASS_ALIASES" in str(info.value)
    assert h.types()[-1] == "ActivityFailed"  # nothing recorded after it


def test_a_failure_recorded_without_a_class_is_an_activity_failed():
    h = Harness(ThreeSteps, "o-1")
    h.task()
    h.fail(1, "", "nope")
    h.task()
    assert h.types()[-1] == "WorkflowFailed"
    assert h.events[-1].payload["message"] == "nope"


def test_discarding_a_suspended_body_runs_finally_without_recording():
    LOG.clear()
    h = Harness(Unwinds)
    runtime = h.runtime()
    runtime.feed(h.events)
    assert len(runtime.take_commands()) == 1
    runtime.dispose()
    assert LOG == ["finally ran"]
    assert runtime.take_commands() == []


def test_helpers_outside_a_body_raise():
    with pytest.raises(NotInWorkflowError, match="activity"):
        dw.activity(Charge, "x")
    with pytest.raises(NotInWorkflowError):
        dw.timer(1)
    with pytest.raises(NotInWorkflowError):
        dw.now()
    with pytest.raises(NotInWorkflowError):
        Workflow.side_effect(lambda: 1)
