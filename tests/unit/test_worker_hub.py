"""Due timers per turn of a worker's event loop: a real kombu hub, real timer entries.

Each test drives the hub's loop generator for one turn. A socket with a byte waiting
is registered as a reader, so the turn's poll returns at once: nothing here waits for
time to pass, and every entry is due a minute before the turn.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from kombu.asynchronous import Hub
from kombu.asynchronous.timer import Timer

from durable_workflow.exceptions import ConfigurationError
from durable_workflow.transport.worker_hub import TimersPerTurn, raise_timers_per_turn


@pytest.fixture
def hub() -> Iterator[Hub]:
    hub = Hub(Timer())
    reader, writer = socket.socketpair()
    writer.send(b"x")  # never read: the reader stays ready, so no turn waits in poll
    hub.add_reader(reader, lambda: None)
    yield hub
    hub.close()
    reader.close()
    writer.close()


def due_entries(hub: Hub, count: int) -> list[int]:
    fired: list[int] = []
    due = time.monotonic() - 60
    for i in range(count):
        hub.call_at(due + i / 1000, fired.append, i)  # in order: i due before i + 1
    return fired


def one_turn(hub: Hub) -> None:
    next(hub.create_loop())


def test_one_turn_of_kombus_loop_fires_ten_due_timers(hub: Hub) -> None:
    fired = due_entries(hub, 50)
    one_turn(hub)
    assert fired == list(range(10))


def test_with_the_limit_raised_one_turn_fires_every_due_timer(hub: Hub) -> None:
    fired = due_entries(hub, 50)
    assert raise_timers_per_turn(hub, 1000) == 1000
    one_turn(hub)
    assert fired == list(range(50))


def test_the_limit_bounds_a_turn(hub: Hub) -> None:
    fired = due_entries(hub, 50)
    raise_timers_per_turn(hub, 30)
    one_turn(hub)
    assert len(fired) == 30
    one_turn(hub)
    assert fired == list(range(50))


@pytest.mark.parametrize("per_turn", [0, None])
def test_zero_or_none_leaves_kombus_limit(hub: Hub, per_turn: int | None) -> None:
    fired = due_entries(hub, 50)
    assert raise_timers_per_turn(hub, per_turn) is None
    assert "fire_timers" not in vars(hub)
    one_turn(hub)
    assert len(fired) == 10


def test_raising_twice_binds_the_hubs_own_method_once(hub: Hub) -> None:
    raise_timers_per_turn(hub, 100)
    raise_timers_per_turn(hub, 200)
    assert hub.fire_timers.keywords == {"max_timers": 200}  # type: ignore[attr-defined]
    assert hub.fire_timers.func == hub.__class__.fire_timers.__get__(hub)  # type: ignore[attr-defined]
    assert "fire_timers" not in vars(Hub(Timer())), "kombu's class is left alone"


class OldHub(Hub):
    def fire_timers(self, min_delay: float = 1, max_delay: float = 10, propagate: Any = ()) -> Any:  # type: ignore[override]
        return super().fire_timers(min_delay, max_delay, propagate=propagate)


def test_a_kombu_without_max_timers_is_left_alone_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = OldHub(Timer())
    with caplog.at_level(logging.WARNING, logger="durable_workflow"):
        assert raise_timers_per_turn(hub, 1000) is None
    assert "fire_timers" not in vars(hub)
    assert "takes no max_timers" in caplog.text
    hub.close()


class FakeWorker:
    def __init__(self, hub: Hub | None) -> None:
        self.hub = hub


def test_the_step_raises_the_workers_hub_to_the_setting(
    hub: Hub, caplog: pytest.LogCaptureFixture
) -> None:
    fired = due_entries(hub, 50)
    with (
        override_settings(DURABLE_WORKFLOW={"WORKER_TIMERS_PER_TURN": 40}),
        caplog.at_level(logging.INFO, logger="durable_workflow"),
    ):
        TimersPerTurn(FakeWorker(hub)).create(FakeWorker(hub))
    assert "due timers: up to 40 per turn" in caplog.text
    one_turn(hub)
    assert len(fired) == 40


def test_the_step_says_when_a_worker_has_no_event_loop(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="durable_workflow"):
        TimersPerTurn(FakeWorker(None)).create(FakeWorker(None))
    assert "runs no kombu event loop" in caplog.text


@pytest.mark.parametrize("bad", [-1, True, 2.5, "1000"])
def test_the_setting_is_none_or_an_integer(bad: object) -> None:
    from durable_workflow.conf import get_settings

    with (
        override_settings(DURABLE_WORKFLOW={"WORKER_TIMERS_PER_TURN": bad}),
        pytest.raises(ConfigurationError, match="WORKER_TIMERS_PER_TURN"),
    ):
        get_settings()


@pytest.mark.parametrize("good", [None, 0, 5000])
def test_none_zero_and_integers_are_accepted(good: int | None) -> None:
    from durable_workflow.conf import get_settings

    with override_settings(DURABLE_WORKFLOW={"WORKER_TIMERS_PER_TURN": good}):
        per_turn = get_settings().WORKER_TIMERS_PER_TURN
    assert per_turn == good
