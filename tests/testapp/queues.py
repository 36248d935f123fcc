"""Activities on a limited work queue (issue 26): they record when their code ran."""

from __future__ import annotations

import time

import durable_workflow as dw
from durable_workflow import Activity, ActivityOptions, Workflow
from tests.testapp.models import Invocation

LIMITED_QUEUE = "limited"


class LimitedWork(Activity):
    """Holds its slot for ``hold`` seconds; its row says when its code ran (wall clock,
    shared by the processes of one machine)."""

    type_key = "tests.limited-work"

    def handle(self, n: int, hold: float) -> int:
        began = time.time()
        time.sleep(hold)
        Invocation.objects.create(name="limited", key=f"{began:.6f}:{time.time():.6f}", attempt=n)
        return n


class FanOutLimited(Workflow):
    """``count`` limited activities at once (routed per call: a class ``queue`` would make
    the doctor of every other test expect a worker on it)."""

    type_key = "tests.fan-out-limited"

    def handle(self, count: int, hold: float) -> list[int]:
        routed = ActivityOptions(queue=LIMITED_QUEUE)
        return dw.all([lambda n=n: dw.activity(LimitedWork, routed, n, hold) for n in range(count)])


class FanOutPrioritised(Workflow):
    """One limited activity per priority in ``priorities``, all scheduled at once."""

    type_key = "tests.fan-out-prioritised"

    def handle(self, priorities: list[int], hold: float) -> list[int]:
        calls = [
            lambda n=n, p=p: dw.activity(
                LimitedWork, ActivityOptions(queue=LIMITED_QUEUE, priority=p), n, hold
            )
            for n, p in enumerate(priorities)
        ]
        return dw.all(calls)


class Plug(Activity):
    """Holds a slot of the limited queue until the test writes ``Invocation(name="unplug")``."""

    type_key = "tests.plug"

    def handle(self) -> str:
        deadline = time.monotonic() + 120
        while not Invocation.objects.filter(name="unplug").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("nobody pulled the plug")
            time.sleep(0.05)
        return "unplugged"


class Plugged(Workflow):
    """One plug on the limited queue."""

    type_key = "tests.plugged"

    def handle(self) -> str:
        return dw.activity(Plug, ActivityOptions(queue=LIMITED_QUEUE))
