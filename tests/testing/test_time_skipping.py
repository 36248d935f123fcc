"""Automatic time skipping in fake mode: a 90-day sleep loop in one call, timers on time."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.models import Timer
from durable_workflow.testing import skipping
from tests.integration.helpers import events_of

pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2027, 1, 1, 8, 0, tzinfo=dt.UTC)
DAY = 86400


def test_a_ninety_day_sleep_loop_finishes_in_one_call():
    clock.freeze(T0)
    with WorkflowStub.fake(skip_time=True):
        stub = WorkflowStub.make("tests.patterns.short-naps", "skip-90")
        stub.start(DAY, 90)  # the drain after the command runs it to the end
        assert stub.refresh().completed()
        assert stub.output() == 90 * DAY  # dw.now() moved by exactly 90 days
    fired = events_of(stub, "TimerFired")
    assert len(fired) == 90
    for event in fired:  # every timer fired at its exact due time, never late
        timer = Timer.objects.get(id=event["timer_id"])
        assert dt.datetime.fromisoformat(event["fired_at"]) == timer.fire_at
    assert clock.now() == T0 + dt.timedelta(days=90)


def test_skipping_stops_at_a_run_that_waits_for_something_else():
    clock.freeze(T0)
    with WorkflowStub.fake(skip_time=True):
        waiting = WorkflowStub.make("tests.approval", "skip-signal")
        waiting.start("signal")
        naps = WorkflowStub.make("tests.patterns.short-naps", "skip-naps")
        naps.start(0.5, 4)
        assert naps.refresh().output() == 2
        assert waiting.refresh().status() == "waiting"  # no deadline: nothing to skip to
        deadline = WorkflowStub.make("tests.approval", "skip-deadline")
        deadline.start("signal-timeout", 3 * DAY)
        assert deadline.refresh().completed() and deadline.output() is None


def test_without_skipping_the_clock_stays_and_run_ready_tasks_can_skip_once():
    clock.freeze(T0)
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.patterns.short-naps", "skip-once")
        stub.start(60, 3)
        assert stub.refresh().status() == "waiting" and clock.now() == T0
        WorkflowStub.run_ready_tasks(skip_time=True)
        assert stub.refresh().output() == 180


def test_retry_back_offs_are_skipped_too():
    clock.freeze(T0)
    with WorkflowStub.fake(skip_time=True):
        stub = WorkflowStub.make("tests.retrying", "skip-retry")
        stub.start(2)
        assert stub.refresh().completed()


def test_an_endless_sleeper_is_reported(monkeypatch):
    monkeypatch.setattr(skipping, "MAX_JUMPS", 5)
    clock.freeze(T0)
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.patterns.short-naps", "skip-endless")
        stub.start(1, 10_000)
        with pytest.raises(skipping.EndlessTimeError):
            WorkflowStub.run_ready_tasks(skip_time=True)


def test_a_ticking_clock_ticks_on_from_the_last_due_time():
    start = clock.now()
    with WorkflowStub.fake(skip_time=True):
        stub = WorkflowStub.make("tests.patterns.short-naps", "skip-ticking")
        stub.start(DAY)
        assert stub.refresh().completed()
    assert clock.snapshot()[1] is None  # not left frozen
    assert clock.now() >= start + dt.timedelta(days=1)
