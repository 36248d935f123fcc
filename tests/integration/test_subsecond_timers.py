"""``dw.timer(0.1)`` waits 100 ms: durations resolve to the millisecond, never early."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.engine.durations import to_delay, to_seconds
from durable_workflow.models import Timer
from tests.integration.helpers import events_of

pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("duration", "delay"),
    [
        (0.1, 0.1),
        (0.0001, 0.001),  # below the resolution: rounded up, never down to 0
        (1.5, 1.5),
        (60, 60),
        ("250ms", 0.25),
        ("1 second 500 milliseconds", 1.5),
        (dt.timedelta(milliseconds=1), 0.001),
    ],
)
def test_durations_resolve_to_the_millisecond(duration, delay):
    assert to_delay(duration) == delay
    assert to_seconds(duration) == -(-delay // 1)  # whole seconds still round up


def test_a_tenth_of_a_second(inline):
    clock.freeze(T0)
    stub = WorkflowStub.make("tests.patterns.short-naps", "nap-1")
    stub.start(0.1)
    inline.run()
    [scheduled] = events_of(stub, "TimerScheduled")
    assert scheduled["delay_seconds"] == 0.1
    assert scheduled["fire_at"] == (T0 + dt.timedelta(milliseconds=100)).isoformat()
    assert Timer.objects.get().delay_seconds == 0.1
    clock.freeze(T0 + dt.timedelta(milliseconds=99))
    inline.run()
    assert stub.refresh().status() == "waiting"  # not a millisecond early
    clock.freeze(T0 + dt.timedelta(milliseconds=100))
    inline.run()
    assert stub.refresh().output() == 0.1
    [fired] = events_of(stub, "TimerFired")
    assert fired["delay_seconds"] == 0.1


def test_whole_seconds_are_recorded_as_before(inline):
    clock.freeze(T0)
    stub = WorkflowStub.make("tests.patterns.short-naps", "nap-2")
    stub.start(2)
    inline.run()
    [scheduled] = events_of(stub, "TimerScheduled")
    assert scheduled["delay_seconds"] == 2 and isinstance(scheduled["delay_seconds"], int)


def test_a_fractional_wait_deadline(inline):
    clock.freeze(T0)
    stub = WorkflowStub.make("tests.approval", "nap-3")
    stub.start("signal-timeout", 0.25)
    inline.run()
    [opened] = events_of(stub, "SignalWaitOpened")
    assert opened["timeout_seconds"] == 0.25
    clock.freeze(T0 + dt.timedelta(milliseconds=250))
    inline.run()
    assert stub.refresh().completed() and stub.output() is None
