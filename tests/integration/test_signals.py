"""Signals: waits, buffering, order, rejections, signal-with-start, the timer race."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings

from durable_workflow import CommandRejected, WorkflowStub, clock
from durable_workflow.models import (
    HistoryEvent,
    Timer,
    WorkflowCommand,
    WorkflowRun,
    WorkflowSignal,
)
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_signal_sent_before_the_wait_opens_is_kept(inline):
    stub = start("tests.approval", "sig-1", "signal")
    result = stub.signal("approved-by", "Taylor")  # the body has not even started yet
    assert result.accepted and result.outcome == "signal_received"
    assert result.target_scope == "instance"
    inline.run()
    stub.refresh()
    assert stub.output() == "Taylor"
    types = event_types(stub)
    assert types.index("SignalReceived") < types.index("SignalWaitOpened")
    assert types.index("SignalWaitOpened") < types.index("SignalApplied")
    assert WorkflowSignal.objects.get().status == "applied"


def test_signal_after_the_wait_opens(inline):
    stub = start("tests.approval", "sig-2", "signal")
    inline.run()
    assert stub.refresh().status() == "waiting"
    stub.signal("approved-by", "Ada")
    inline.run()
    assert stub.refresh().output() == "Ada"
    opened = events_of(stub, "SignalWaitOpened")
    assert len(opened) == 1 and opened[0]["signal_name"] == "approved-by"


@pytest.mark.parametrize(
    ("args", "expected"), [((), True), (("one",), "one"), (("a", 2, None), ["a", 2, None])]
)
def test_payload_shape(inline, args, expected):
    stub = start("tests.approval", f"sig-shape-{len(args)}", "signal")
    stub.signal("approved-by", *args)
    inline.run()
    assert stub.refresh().output() == expected


def test_many_signals_are_consumed_in_order_across_activities(inline):
    stub = start("tests.approval", "sig-many", "many")
    stub.signal("ping", 1)
    inline.run()
    stub.signal("ping", 2)
    stub.signal("ping", 3)
    inline.run()
    stub.signal("ping", 4)
    stub.signal("ping", 5)
    inline.run()
    assert stub.refresh().output() == [1, 2, 3, 4, 5]
    applied = events_of(stub, "SignalApplied")
    assert [a["sequence"] for a in applied] == sorted(a["sequence"] for a in applied)
    assert len(events_of(stub, "SignalWaitOpened")) == 5


def test_unknown_signal_is_rejected_durably_and_never_buffered(inline):
    stub = start("tests.approval", "sig-unknown", "signal")
    result = stub.attempt_signal("no-such-signal", 1)
    assert result.rejected
    assert (result.outcome, result.rejection_reason) == (
        "rejected_unknown_signal",
        "unknown_signal",
    )
    with pytest.raises(CommandRejected) as info:
        stub.signal("no-such-signal")
    assert info.value.reason == "unknown_signal"
    command = WorkflowCommand.objects.filter(command_type="signal").first()
    assert command.status == "rejected"
    signal = WorkflowSignal.objects.filter(command=command).get()
    assert signal.status == "rejected" and signal.rejection_reason == "unknown_signal"
    assert "SignalReceived" not in event_types(stub)


def test_signals_to_unstarted_and_closed_runs_are_rejected(inline):
    reserved = WorkflowStub.make("tests.approval", "sig-reserved")
    result = reserved.attempt_signal("approved-by", "x")
    assert (result.outcome, result.rejection_reason) == (
        "rejected_not_started",
        "instance_not_started",
    )
    stub = start("tests.approval", "sig-closed", "signal")
    stub.signal("approved-by", "x")
    inline.run()
    closed = stub.attempt_signal("approved-by", "again")
    assert (closed.outcome, closed.rejection_reason) == ("rejected_not_active", "run_not_active")
    assert WorkflowSignal.objects.filter(status="rejected").count() == 2


def test_run_targeted_signal_to_a_historical_run_is_rejected(inline):
    stub = start("tests.approval", "sig-pinned", "signal")
    pinned = WorkflowStub.load_run(stub.run_id())
    # simulate continue-as-new: a newer run becomes current
    run = WorkflowRun.objects.get(id=stub.run_id())
    newer = WorkflowRun.objects.create(
        instance_id="sig-pinned",
        run_number=2,
        workflow_type=run.workflow_type,
        arguments=run.arguments,
        created_at=run.created_at,
        updated_at=run.updated_at,
    )
    result = pinned.attempt_signal("approved-by", "x")
    assert result.target_scope == "run"
    assert (result.outcome, result.rejection_reason) == (
        "rejected_not_current",
        "selected_run_not_current",
    )
    assert result.metadata == {
        "requested_run_id": stub.run_id(),
        "resolved_run_id": str(newer.id),
    }


def test_signal_contract_validation(inline):
    stub = start("tests.approval", "sig-typed", "typed")
    bad = stub.attempt_signal("typed", 42)
    assert bad.outcome == "rejected_invalid_arguments"
    assert bad.validation_errors == {"who": ["The who argument must be of type string."]}
    missing = stub.attempt_signal_with_arguments("typed", {"count": 1})
    assert missing.validation_errors == {"who": ["The who argument is required."]}
    unknown = stub.attempt_signal_with_arguments("typed", {"who": "a", "extra": 1})
    assert "extra" in unknown.validation_errors
    ok = stub.attempt_signal_with_arguments("typed", {"count": 2, "who": "Ada"})
    assert ok.accepted
    inline.run()
    assert stub.refresh().output() == ["Ada", 2]  # reordered to declaration order


def test_pending_signal_limit_rejects_without_failing_the_run(inline):
    stub = start("tests.approval", "sig-limit", "signal-timeout")
    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {"pending_signal_count": 2}}):
        assert stub.attempt_signal("ping", 1).accepted
        assert stub.attempt_signal("ping", 2).accepted
        third = stub.attempt_signal("ping", 3)
    assert third.rejection_reason == "structural_limit_exceeded"
    assert third.metadata == {
        "structural_limit_kind": "pending_signal_count",
        "structural_limit_value": 3,
        "structural_limit_configured": 2,
    }
    assert stub.refresh().running()


def test_signal_with_start_creates_and_signals_in_one_go(inline):
    stub = WorkflowStub.make("tests.approval", "sws-new")
    result = stub.signal_with_start("approved-by", "Grace", start_args=["signal"])
    assert result.start.accepted and result.start.outcome == "started_new"
    assert result.signal.accepted
    start_cmd = WorkflowCommand.objects.get(command_type="start")
    signal_cmd = WorkflowCommand.objects.get(command_type="signal")
    assert start_cmd.payload["intake_group_id"] == signal_cmd.payload["intake_group_id"]
    inline.run()
    assert stub.refresh().output() == "Grace"


def test_signal_with_start_of_an_existing_instance_only_signals(inline):
    stub = start("tests.approval", "sws-existing", "signal")
    result = WorkflowStub.load("sws-existing").signal_with_start("approved-by", "Linus")
    assert result.start.outcome == "returned_existing_active"
    assert WorkflowRun.objects.filter(instance_id="sws-existing").count() == 1
    inline.run()
    assert stub.refresh().output() == "Linus"


def test_signal_with_start_rejects_unknown_signals_before_any_run_exists(inline):
    stub = WorkflowStub.make("tests.approval", "sws-bad")
    result = stub.signal_with_start("nope", start_args=["signal"])
    assert result.start is None
    assert result.signal.outcome == "rejected_unknown_signal"
    assert not WorkflowRun.objects.filter(instance_id="sws-bad").exists()
    assert not HistoryEvent.objects.exists()


def test_signal_beats_the_timeout(inline):
    stub = start("tests.approval", "race-signal", "signal-timeout", 60)
    inline.run()
    timer = Timer.objects.get(run_id=stub.run_id())
    assert timer.timer_kind == "signal_timeout"
    stub.signal("approved-by", "fast")
    clock.advance(dt.timedelta(seconds=61))  # the timer is due too, but the signal came first
    inline.run()
    stub.refresh()
    assert stub.output() == "fast"
    assert "TimerCancelled" in event_types(stub)
    assert Timer.objects.get(id=timer.id).status == "cancelled"


def test_timeout_beats_the_signal(inline):
    stub = start("tests.approval", "race-timer", "signal-timeout", 60)
    inline.run()
    clock.advance(dt.timedelta(seconds=61))
    inline.run()  # the timer fires before any signal
    stub.refresh()
    assert stub.completed() and stub.output() is None
    late = stub.attempt_signal("approved-by", "slow")
    assert late.rejection_reason == "run_not_active"


def test_race_when_both_landed_before_the_workflow_task(inline):
    """Timer fired and signal received while no workflow task ran: history order decides."""
    from durable_workflow import executor
    from durable_workflow.models import Task

    stub = start("tests.approval", "race-both", "signal-timeout", 60)
    inline.run()
    clock.advance(dt.timedelta(seconds=61))
    timer_task = Task.objects.get(run_id=stub.run_id(), task_type="timer")
    assert executor.run_timer_task(timer_task.id) == "fired"  # TimerFired first
    stub.signal("approved-by", "too late")  # SignalReceived second
    inline.run()
    stub.refresh()
    assert stub.output() is None
    signal = WorkflowSignal.objects.get(status="received")
    assert signal.signal_name == "approved-by"  # kept, never applied


def test_zero_timeout_returns_at_once(inline):
    stub = start("tests.approval", "zero-timeout", "signal-timeout", 0)
    inline.run()
    stub.refresh()
    assert stub.completed() and stub.output() is None
    timer = Timer.objects.get(run_id=stub.run_id())
    assert (timer.status, timer.delay_seconds) == ("fired", 0)
    assert not stub.history()[-1].event_type.startswith("Timer")


def test_signal_handlers_receive_signals(inline):
    stub = start("tests.handlers", "handlers-1", 2)
    stub.signal("note", "first")
    inline.run()
    assert stub.query("notes") == ["first"]
    stub.signal("note", "second")
    inline.run()
    assert stub.refresh().output() == ["first", "second"]
    assert [a.get("applied_by") for a in events_of(stub, "SignalApplied")] == [
        "handler",
        "handler",
    ]
