"""The event loop of a worker process, on which its async activities run.

One loop per process, in a daemon thread started the first time an async attempt
comes (a prefork child starts its own: a loop does not survive a fork), stopped
with the worker (``async_attempts.shutdown``). The engine's own database work for
those attempts (settling, heartbeats, hand-backs) runs in a small pool of threads
beside it, never on the loop: Django's ORM is synchronous, and one slow statement
must not stall every coroutine of the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from durable_workflow.executor import eager
from durable_workflow.store import connections

T = TypeVar("T")

#: Threads for the engine's database work of the async attempts of one process (each
#: holds one connection of its own).
DB_THREADS = 4


class _Loop:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._db: concurrent.futures.ThreadPoolExecutor | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """The process's running loop (started now if need be)."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or self._pid != os.getpid() or not alive:
                self._start()
            assert self._loop is not None
            return self._loop

    def running(self) -> asyncio.AbstractEventLoop | None:
        """The process's loop if it runs (never starts one)."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or self._thread is None:
                return None
            return self._loop if self._thread.is_alive() else None

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        self._loop, self._pid = loop, os.getpid()
        self._db = concurrent.futures.ThreadPoolExecutor(
            DB_THREADS, thread_name_prefix="durable-workflow-async-db", initializer=_db_thread
        )
        self._thread = threading.Thread(target=run, name="durable-workflow-loop", daemon=True)
        self._thread.start()
        started.wait()

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the engine's synchronous database work ``fn(*args)`` off the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db, functools.partial(_db_call, fn, *args))

    def stop(self) -> None:
        """Stop the loop and its database threads (the attempts were handed back)."""
        with self._lock:
            loop, thread, db = self._loop, self._thread, self._db
            self._loop = self._thread = self._db = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_wind_down(), loop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
        if db is not None:
            # One job per thread (each waits for the others), each closing its connection.
            together = threading.Barrier(DB_THREADS)
            for _ in range(DB_THREADS):
                db.submit(_close_connection, together)
            db.shutdown(wait=True, cancel_futures=False)


async def _wind_down() -> None:
    """Cancel what still runs on the loop (the process's own checks), then stop it."""
    from asgiref.sync import sync_to_async

    # The connection Django's async ORM used for the activities (asgiref's one thread).
    await sync_to_async(connections.close_thread_connections)()
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    asyncio.get_running_loop().stop()


def _db_thread() -> None:
    # Work settled here goes on here (an eager workflow task), but never leases another
    # activity to this thread: it would hold a database thread for its whole run.
    eager.no_activities_here()


def _close_connection(together: threading.Barrier) -> None:
    connections.close_thread_connections()
    with contextlib.suppress(threading.BrokenBarrierError):
        together.wait(timeout=2)


def _db_call(fn: Callable[..., T], *args: Any) -> T:
    connections.discard_broken()
    return fn(*args)


loop = _Loop()
