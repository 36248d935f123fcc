"""Handlers that finish cleanly: ``dw.all_handlers_finished()``, ``dw.Lock()``, ``dw.Semaphore(n)``.

A signal or update handler that calls a durable helper is suspended there, and
other handlers (and the body) run meanwhile. ``Lock`` and ``Semaphore`` keep
such handlers from interleaving inside a section; permits go to waiters one at
a time, oldest first, and identically on every replay. Create them inside the
workflow (in ``__init__`` or the body), never at import time.
"""

from __future__ import annotations

from types import TracebackType

from durable_workflow.authoring.helpers import _runtime


def all_handlers_finished() -> bool:
    """True when no signal or update handler is running (suspended half-way included).

    Wait for it before completing or continuing as new:
    ``dw.wait(dw.all_handlers_finished)``.
    """
    return bool(_runtime("all_handlers_finished").all_handlers_finished())


class Semaphore:
    """``permits`` holders at a time; ``with sem:`` or ``acquire()`` / ``release()``."""

    def __init__(self, permits: int = 1) -> None:
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
            raise ValueError(f"a semaphore needs a whole number of permits >= 1, not {permits!r}")
        self._permits = _runtime(type(self).__name__).permits(permits)

    def acquire(self) -> None:
        """Take a permit, waiting until one is free (waiters are served in order)."""
        self._permits.acquire()

    def release(self) -> None:
        """Give the permit back (to the oldest waiter, if any)."""
        self._permits.release()

    def locked(self) -> bool:
        """True when no permit is free."""
        return bool(self._permits.free == 0)

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class Lock(Semaphore):
    """One holder at a time: ``with self.lock:`` around a section that awaits durable steps."""

    def __init__(self) -> None:
        super().__init__(1)
