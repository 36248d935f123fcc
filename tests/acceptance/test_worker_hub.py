"""A real worker's hub fires WORKER_TIMERS_PER_TURN due timers a turn, whatever its pool.

The worker answers remote-control commands of the test app (``tests/celery_app.py``):
the keywords bound to its hub's ``fire_timers``, and how many of 50 timer entries, all
due, the next turn of its running event loop fires (kombu alone: 10).
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.acceptance.conftest import wait_for
from tests.celery_app import app

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


NODE = f"worker0@{socket.gethostname()}"


def ask(command: str) -> dict[str, Any]:
    """The worker's first non-empty answer to ``command``."""
    answers: list[dict[str, Any]] = []

    def answered() -> bool:
        replies = app.control.broadcast(command, reply=True, destination=[NODE], timeout=2)
        answers.extend(r[NODE] for r in replies or [] if r.get(NODE))
        return bool(answers)

    wait_for(answered, timeout=60, interval=0.5, message=f"{NODE} gave no answer to {command}")
    return answers[0]


def hub() -> dict[str, Any]:
    return ask("dw_hub_fire_timers")


def fired_in_one_turn() -> int:
    assert ask("dw_hub_probe_turn") == {"scheduled": 50}
    return int(ask("dw_hub_probe_result")["fired_in_one_turn"])


@pytest.mark.parametrize("pool", ["solo", "prefork", "threads"])
def test_every_pool_fires_the_settings_due_timers_per_turn(start_worker, pool):
    worker = start_worker(
        pool=pool,
        beat=False,
        env={"DW_EXTRA_SETTINGS_JSON": json.dumps({"WORKER_TIMERS_PER_TURN": 250})},
    )
    assert hub() == {
        "hub": "Hub",
        "keywords": {"max_timers": 250},
    }
    assert fired_in_one_turn() == 50
    assert worker.output().count("due timers: up to 250 per turn of the worker's event loop") == 1


def test_the_default_is_a_thousand(start_worker):
    start_worker(beat=False)
    assert hub()["keywords"] == {"max_timers": 1000}


def test_zero_leaves_kombus_limit(start_worker):
    worker = start_worker(
        beat=False, env={"DW_EXTRA_SETTINGS_JSON": json.dumps({"WORKER_TIMERS_PER_TURN": 0})}
    )
    assert hub() == {"hub": "Hub", "keywords": {}}
    assert fired_in_one_turn() == 10
    assert "due timers: kombu's own limit per turn" in worker.output()
