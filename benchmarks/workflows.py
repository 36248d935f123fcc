"""Workflows and activities the benchmarks run (discovered as ``benchmarks.workflows``).

The local-activity and fan-out workflows only exist when the engine has the
helper they need (``dw.local_activity``, ``dw.all``); the harness reports the
scenario as "not available" otherwise, so the suite keeps working as the
engine grows.
"""

from __future__ import annotations

import asyncio
import functools
import time

import durable_workflow as dw
from durable_workflow import Activity, Workflow

HAS_LOCAL_ACTIVITY = callable(getattr(dw, "local_activity", None))
HAS_ALL = callable(getattr(dw, "all", None))


class Noop(Activity):
    type_key = "bench.noop"

    def handle(self, index: int = 0) -> int:
        return index


class Sequence(Workflow):
    """``count`` queued no-op activities, one after the other."""

    type_key = "bench.sequence"

    def handle(self, count: int) -> int:
        for index in range(count):
            dw.activity(Noop, index)
        return count


class OneStep(Workflow):
    type_key = "bench.one-step"

    def handle(self) -> int:
        return dw.activity(Noop, 1)


class LocalSteps(Workflow):
    """``count`` local (in-process) no-op activities."""

    type_key = "bench.local-steps"

    def handle(self, count: int) -> int:
        if not HAS_LOCAL_ACTIVITY:
            raise RuntimeError("this engine has no dw.local_activity")
        for index in range(count):
            dw.local_activity(Noop, index)
        return count


class FanOut(Workflow):
    """``dw.all`` of ``count`` no-op activities."""

    type_key = "bench.fan-out"

    def handle(self, count: int) -> int:
        if not HAS_ALL:
            raise RuntimeError("this engine has no dw.all")
        results = dw.all([functools.partial(dw.activity, Noop, i) for i in range(count)])
        return len(results)


class SleepIO(Activity):
    """An I/O-bound activity: it waits, holding its Celery slot."""

    type_key = "bench.sleep-io"

    def handle(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


class AsyncSleepIO(Activity):
    """The same wait, awaited on the worker process's event loop."""

    type_key = "bench.async-sleep-io"

    async def handle(self, seconds: float) -> int:
        await asyncio.sleep(seconds)
        return 1


class IOFanOut(Workflow):
    """``dw.all`` of ``count`` I/O-bound activities, sync or async."""

    type_key = "bench.io-fan-out"

    def handle(self, use_async: bool, count: int, seconds: float) -> int:
        activity = AsyncSleepIO if use_async else SleepIO
        return sum(
            dw.all([functools.partial(dw.activity, activity, seconds) for _ in range(count)])
        )


#: The limited queue of the ``queue_limit`` scenario (``benchmarks.settings``): as many
#: slots as the scenario's two solo workers have, so the limit itself never binds and
#: what is measured is the gate's own cost.
LIMITED_QUEUE, OPEN_QUEUE = "bench-limited", "bench-open"


class QueueFanOut(Workflow):
    """``dw.all`` of ``count`` no-op activities routed to ``queue``."""

    type_key = "bench.queue-fan-out"

    def handle(self, queue: str, count: int) -> int:
        routed = dw.ActivityOptions(queue=queue)
        results = dw.all([functools.partial(dw.activity, Noop, routed, i) for i in range(count)])
        return len(results)


class Long(Workflow):
    """``count`` queued no-op activities that also take a signal and answer a query: the
    ``long`` scenario drives it to a 50,000-event history."""

    type_key = "bench.long"

    def __init__(self) -> None:
        self.pokes = 0

    @dw.signal("poke")
    def poke(self, n: int) -> None:
        self.pokes += n

    @dw.query("pokes")
    def poked(self) -> int:
        return self.pokes

    def handle(self, count: int) -> int:
        for index in range(count):
            dw.activity(Noop, index)
        return self.pokes


class Echo(Activity):
    type_key = "bench.echo"

    def handle(self, data: str) -> str:
        return data


class BigPayloads(Workflow):
    """``count`` activities, each taking and returning a string of ``size`` characters."""

    type_key = "bench.big-payloads"

    def handle(self, count: int, size: int) -> int:
        total = 0
        for index in range(count):
            blob = str(index % 10) * size
            total += len(dw.activity(Echo, blob))
        return total


def _engine_time() -> float:
    from durable_workflow import clock

    return clock.now().timestamp()


class SleepUntil(Workflow):
    """Sleeps until ``due`` (epoch seconds on the engine's clock), then returns: the
    ``timers`` scenario. The delay is counted from the clock of the first workflow task
    (a side effect), not from the start's time, so a backlog of starts does not move
    the timer's due time."""

    type_key = "bench.sleep-until"

    def handle(self, due: float) -> float:
        now = dw.side_effect(_engine_time)
        dw.timer(max(due - now, 0.001))
        return due


from benchmarks import seed_workflows  # noqa: E402,F401  (the seed copies their runs)
