"""Deterministic locks for workflow code: ``dw.Lock()`` and ``dw.Semaphore(n)``.

A signal or update handler that waits on durable operations can be suspended
half-way while another handler (or the body) runs. A permit count guards such
sections. It lives in memory only: waiters are futures of the scheduler, and a
released permit goes straight to the oldest waiter (no barging), which the
scheduler wakes in its FIFO order. Greenlets run in the same order on every
replay, so the grants are the same too; nothing is recorded in history.
"""

from __future__ import annotations

from collections import deque

from durable_workflow.engine.scheduler import Future, Scheduler


class Permits:
    """``count`` permits, granted one at a time to waiters in the order they asked."""

    def __init__(self, scheduler: Scheduler, count: int) -> None:
        self._scheduler = scheduler
        self._limit = count
        self._free = count
        self._waiters: deque[Future] = deque()

    @property
    def free(self) -> int:
        return self._free

    def acquire(self) -> None:
        """Take a permit, waiting (FIFO) while none is free."""
        scheduler = self._scheduler
        if scheduler.unwinding or scheduler.restricted:
            scheduler.check_may_step("a lock", str)
        if self._free and not self._waiters:
            self._free -= 1
            return
        future = Future(0)
        self._waiters.append(future)
        try:
            scheduler.wait(future)
        except BaseException:
            if future in self._waiters:  # gave up waiting (cancelled, unwound)
                self._waiters.remove(future)
            elif future.done and future.error is None:  # granted, but never used
                self.release()
            raise

    def release(self) -> None:
        """Give a permit back: to the oldest waiter still waiting, else to the pool."""
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done:
                self._scheduler.resolve(future)  # the permit passes on, still taken
                return
        if self._free >= self._limit:
            raise RuntimeError("released more often than acquired")
        self._free += 1
