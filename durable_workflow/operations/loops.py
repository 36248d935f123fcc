"""Long-running loops (``workflow_repair --loop``, ``schedule_tick --loop``) outlive outages.

A loop that exits on its first database error is restarted by its supervisor
straight into the same outage, and, left stopped, strands every run whose
messages were consumed while the database was away. Here a failed pass only
discards the broken connection and waits, doubling the wait up to
``LOOP_BACKOFF_MAX_SECONDS``; one line is logged when an outage starts and one
when a pass succeeds again, not one per attempt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator

from durable_workflow.conf import get_settings
from durable_workflow.logs import get_logger
from durable_workflow.store import connections, dbclock

logger = get_logger("durable_workflow")


@dataclasses.dataclass
class _Outage:
    started: float
    failures: int = 1


def run_forever(
    step: Callable[[], None], *, name: str, interval: float, pause: Callable[[float], bool]
) -> None:
    """Call ``step`` every ``interval`` seconds, riding out failures, until ``pause``
    (called with the seconds to wait) answers ``True``."""
    settings = get_settings()
    outage: _Outage | None = None
    while True:
        try:
            dbclock.keep_following()  # the loop's due decisions in the database's time
            step()
        except Exception as exc:  # any failure: wait, then try again
            connections.discard_broken()
            if outage is None:
                outage = _Outage(started=time.monotonic())
                logger.error(
                    "%s: pass failed (%s: %s); retrying with back-off until it succeeds",
                    name,
                    type(exc).__name__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                )
            else:
                outage.failures += 1
            wait = min(
                settings.LOOP_BACKOFF_INITIAL_SECONDS * 2 ** (outage.failures - 1),
                settings.LOOP_BACKOFF_MAX_SECONDS,
            )
        else:
            if outage is not None:
                logger.warning(
                    "%s: recovered after %.1f s (%d failed passes)",
                    name,
                    time.monotonic() - outage.started,
                    outage.failures,
                )
                outage = None
            wait = interval
        if pause(wait):
            return


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Let SIGTERM / SIGINT end a loop between passes, never in the middle of one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = lambda signum, frame: stop.set()  # noqa: E731
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
