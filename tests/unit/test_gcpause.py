"""The cyclic collector is held off through a long replay, and turned back on after."""

from __future__ import annotations

import gc
import threading

import pytest

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.engine import gcpause
from tests.unit.harness import Harness

SEEN: list[bool] = []


class Step(Activity):
    type_key = "unit.gc-step"


class Steps(Workflow):
    type_key = "unit.gc-steps"

    def handle(self, count: int) -> int:
        for n in range(count):
            SEEN.append(gc.isenabled())
            dw.activity(Step, n)
        return count


@pytest.fixture(autouse=True)
def collector_on():
    assert gc.isenabled()
    yield
    gc.enable()


def test_pauses_overlap_and_the_last_one_turns_the_collector_back_on():
    with gcpause.paused():
        assert not gc.isenabled()
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_in_another_thread_keeps_it_off_until_that_one_ends():
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with gcpause.paused():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(10)
    with gcpause.paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_block_that_raises_turns_it_back_on():
    with pytest.raises(KeyError), gcpause.paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_someone_else_turned_off_stays_off():
    gc.disable()
    with gcpause.paused():
        pass
    assert not gc.isenabled()


def _history(steps: int) -> Harness:
    h = Harness(Steps, steps)
    for step in range(1, steps + 1):
        h.task()
        h.complete(step, None)
    h.task()
    assert h.result() == steps
    return h


@pytest.mark.parametrize(("many", "enabled"), [(10, False), (1_000, True)])
def test_a_long_feed_replays_with_the_collector_off(monkeypatch, many, enabled):
    h = _history(5)  # 17 events
    monkeypatch.setattr(gcpause, "MANY_EVENTS", many)
    SEEN.clear()
    runtime = h.runtime()
    runtime.feed(h.events[:-1])
    assert runtime.take_commands() == []
    assert [enabled] * 5 == SEEN
    assert gc.isenabled()
