"""Async activities (``async def handle``) and the workflows that run them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, ActivityFailed, ActivityOptions, Workflow
from tests.testapp.models import Invocation

#: Attempts of ``AsyncNap`` running now in this process (the loop is one thread), and
#: the most that ever ran at once (a test resets it).
LIVE = {"now": 0, "peak": 0}


class AsyncNap(Activity):
    """Sleeps; records how many naps of this process were running when it began.

    With ``gather``, it sleeps until that many naps of this process have run at once
    (or ``seconds`` pass), so a test of concurrency does not hang on the machine's speed.
    """

    type_key = "tests.async.nap"

    async def handle(self, seconds: float, gather: int = 0) -> int:
        LIVE["now"] += 1
        LIVE["peak"] = max(LIVE["peak"], LIVE["now"])
        try:
            await Invocation.objects.acreate(
                name="async-nap", key=self.activity_id(), attempt=LIVE["now"]
            )
            if not gather:
                await asyncio.sleep(seconds)
                return 1
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            while LIVE["peak"] < gather and loop.time() < deadline:
                await asyncio.sleep(0.01)
            return 1
        finally:
            LIVE["now"] -= 1


class AsyncNapOnce(Activity):
    """Sleeps long on its first invocation only (a handed-back attempt runs again)."""

    type_key = "tests.async.nap-once"

    async def handle(self, seconds: float) -> str:
        await Invocation.objects.acreate(name="async-nap-once", key=self.activity_id())
        runs = await Invocation.objects.filter(
            name="async-nap-once", key=self.activity_id()
        ).acount()
        if runs == 1:
            await asyncio.sleep(seconds)
        return f"ran {runs}"


class AsyncBeats(Activity):
    type_key = "tests.async.beats"

    async def handle(self, beats: int) -> int:
        for done in range(1, beats + 1):
            await asyncio.sleep(0.05)
            assert await self.aheartbeat({"current": done, "total": beats})
        return beats


class AsyncWaitsForCancel(Activity):
    """Runs until cancelled; says so in a row (``beat``: heartbeats while it waits)."""

    type_key = "tests.async.waits-for-cancel"

    async def handle(self, beat: bool) -> str:
        await Invocation.objects.acreate(name="async-waiting", key=self.activity_id())
        try:
            while True:
                await asyncio.sleep(0.1)
                if beat:
                    await self.aheartbeat()
        except asyncio.CancelledError:
            await Invocation.objects.acreate(name="async-saw-cancel", key=self.activity_id())
            await self.clean_up()
            raise

    async def clean_up(self) -> None:
        """What runs after the cancel was seen, before it is raised again."""


#: ``began``: set by ``AsyncCleansUp`` when its clean-up begins; it ends once a test
#: sets ``may_end``.
CLEAN_UP = {"began": threading.Event(), "may_end": threading.Event()}


class AsyncCleansUp(AsyncWaitsForCancel):
    """As its parent, then cleans up until a test lets it finish (at most 60 s); says in
    a row that it got to the clean-up's end."""

    type_key = "tests.async.cleans-up"

    async def clean_up(self) -> None:
        CLEAN_UP["began"].set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not CLEAN_UP["may_end"].is_set() and loop.time() < deadline:
            await asyncio.sleep(0.01)  # a second CancelledError here cuts it short
        await Invocation.objects.acreate(name="async-cleaned-up", key=self.activity_id())


class AsyncFanOut(Workflow):
    type_key = "tests.async.fan-out"

    def handle(self, count: int, seconds: float, gather: int = 0) -> int:
        naps = dw.all([lambda: dw.activity(AsyncNap, seconds, gather) for _ in range(count)])
        return sum(naps)


class AsyncHandBack(Workflow):
    type_key = "tests.async.hand-back"

    def handle(self, count: int, seconds: float) -> list[str]:
        return dw.all([lambda: dw.activity(AsyncNapOnce, seconds) for _ in range(count)])


class AsyncOne(Workflow):
    """One async activity by type key, with a start-to-close timeout when given."""

    type_key = "tests.async.one"

    def handle(self, activity: str, argument: Any, timeout: int = 0) -> Any:
        options = ActivityOptions(start_to_close_timeout=timeout or None, max_attempts=1)
        try:
            return dw.activity(activity, argument, options=options)
        except ActivityFailed as exc:
            return f"failed: {exc}"
