"""Time travel on the engine clock: plain calls, blocks, freezing, the fixtures."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.testing import freeze, travel, travel_to


def close_to(a: dt.datetime, b: dt.datetime, seconds: float = 1.0) -> bool:
    return abs((a - b).total_seconds()) < seconds


def test_travel_moves_the_clock_until_reset():
    start = clock.now()
    travel(hours=2, minutes=30)
    assert close_to(clock.now(), start + dt.timedelta(hours=2, minutes=30))
    travel(days=1, weeks=1, seconds=-60)
    assert close_to(clock.now(), start + dt.timedelta(days=8, hours=2, minutes=29))
    clock.reset()
    assert close_to(clock.now(), start)


def test_travel_as_a_block_is_undone():
    start = clock.now()
    with travel(days=3) as change:
        assert close_to(clock.now(), start + dt.timedelta(days=3))
        assert "ClockChange" in repr(change)
    assert close_to(clock.now(), start)
    assert clock.is_real()


def test_freeze_stops_the_clock_and_travel_still_moves_it():
    moment = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    with freeze(moment):
        assert clock.now() == moment
        with travel(seconds=90):
            assert clock.now() == moment + dt.timedelta(seconds=90)
        assert clock.now() == moment
    assert clock.is_real()


def test_blocks_restore_an_earlier_travel():
    travel(hours=1)
    before = clock.now()
    with freeze():
        pass
    assert close_to(clock.now(), before) and not clock.is_real()
    with travel_to(dt.datetime(2040, 6, 1, tzinfo=dt.UTC)):
        assert close_to(clock.now(), dt.datetime(2040, 6, 1, tzinfo=dt.UTC))
    assert close_to(clock.now(), before)


def test_travel_to_while_frozen_stays_frozen():
    freeze(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    travel_to(dt.datetime(2031, 1, 1, tzinfo=dt.UTC))
    assert clock.now() == dt.datetime(2031, 1, 1, tzinfo=dt.UTC)


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        travel_to(dt.datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        freeze(dt.datetime(2030, 1, 1))


def test_workflow_clock_fixture(workflow_clock):
    start = workflow_clock.now()
    workflow_clock.travel(minutes=5)
    assert close_to(workflow_clock.now(), start + dt.timedelta(minutes=5))
    workflow_clock.freeze()
    frozen = workflow_clock.now()
    assert workflow_clock.now() == frozen
    workflow_clock.reset()
    assert clock.is_real()


def test_a_travelled_timer_reports_the_travelled_time(workflow_fake, workflow_clock):
    workflow_clock.freeze(dt.datetime(2030, 1, 1, 12, tzinfo=dt.UTC))
    stub = WorkflowStub.make("tests.sleeper", "sleep-travel")
    stub.start(3600)
    workflow_clock.travel(hours=1)
    WorkflowStub.run_ready_tasks()
    assert stub.refresh().output() == "slept 3600"


def test_leaking_fake_mode_first():
    WorkflowStub.fake()  # never restored by this test


def test_leaking_fake_mode_second():
    assert not WorkflowStub.is_fake()  # the plugin restored it after the previous test
