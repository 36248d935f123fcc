"""The workload every scenario runs (discovered as ``reliability.workflows``).

``Order`` covers what the issue asks for in one run: sequential activities, a timer, a
signal, a child workflow and a fan-out. Its output is a pure function of its arguments
(:func:`expected_order`), so a wrong output is detectable from the database alone.
``Poison*`` crash the process that runs them, every time.
"""

from __future__ import annotations

import functools
import os
import signal
import time

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from reliability import ledger

SIGNAL = "go"


def signal_token(n: int) -> str:
    return f"go-{n}"


class Step(Activity):
    """A short piece of work with a visible result; each execution is in the ledger."""

    type_key = "chaos.step"
    tries = 3

    def handle(self, n: int, index: int) -> int:
        ledger.record("step", self.activity_id())
        time.sleep(((n * 7 + index * 13) % 5) * 0.01)  # 0-40 ms: kills land mid-activity too
        return n * 1000 + index


class Slow(Activity):
    """A long activity, heartbeating every second or silent: either way its lease must
    never be taken from it while it runs."""

    type_key = "chaos.slow"
    tries = 3

    def handle(self, n: int, seconds: int, heartbeats: bool) -> int:
        ledger.record("step", self.activity_id())
        for _ in range(seconds):
            time.sleep(1)
            if heartbeats:
                self.heartbeat()
        return n


class Leg(Workflow):
    """The child: one activity and a one-second timer."""

    type_key = "chaos.leg"

    def handle(self, n: int) -> int:
        value = dw.activity(Step, n, 500)
        dw.timer(1)
        return value + 1


class Order(Workflow):
    type_key = "chaos.order"
    signals = [SIGNAL]

    def handle(
        self,
        n: int,
        steps: int,
        timer_seconds: int,
        fan: int,
        child: bool,
        slow_seconds: int,
        slow_heartbeats: bool,
    ) -> dict:
        if slow_seconds:
            dw.activity(Slow, n, slow_seconds, slow_heartbeats)
        total = sum(dw.activity(Step, n, index) for index in range(steps))
        dw.timer(timer_seconds)
        token = dw.wait_signal(SIGNAL, timeout="15 minutes")
        leg = dw.child(Leg, n) if child else None
        parts = dw.all([functools.partial(dw.activity, Step, n, 100 + k) for k in range(fan)])
        return {"n": n, "total": total, "token": token, "leg": leg, "fan": sum(parts)}


def expected_order(
    n: int,
    steps: int,
    timer_seconds: int,
    fan: int,
    child: bool,
    slow_seconds: int,
    slow_heartbeats: bool,
) -> dict:
    """What ``Order.handle`` returns for these arguments."""
    del timer_seconds, slow_seconds, slow_heartbeats
    return {
        "n": n,
        "total": sum(n * 1000 + index for index in range(steps)),
        "token": signal_token(n),
        "leg": n * 1000 + 500 + 1 if child else None,
        "fan": sum(n * 1000 + 100 + k for k in range(fan)),
    }


class Tick(Workflow):
    """What the every-second schedules start."""

    type_key = "chaos.tick"

    def handle(self, label: str) -> str:
        dw.activity(Step, 0, 900)
        return label


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class PoisonStep(Activity):
    """Kills the worker process that runs it, every attempt."""

    type_key = "chaos.poison-step"
    tries = 3

    def handle(self) -> None:
        ledger.record("poison-step", self.activity_id())
        _crash()


class PoisonActivity(Workflow):
    type_key = "chaos.poison-activity"

    def handle(self) -> str:
        try:
            dw.activity(PoisonStep)
        except dw.ActivityFailed as exc:
            return f"gave up: {exc}"[:200]
        return "impossible"


class PoisonWorkflow(Workflow):
    """Its workflow task kills the worker after the first activity, on every replay."""

    type_key = "chaos.poison-workflow"
    unsafe_calls = "allow"  # it writes to the ledger and kills its worker on purpose

    def handle(self) -> str:
        dw.activity(Step, 0, 950)
        ledger.record("poison-task", "body")
        _crash()
        return "impossible"
