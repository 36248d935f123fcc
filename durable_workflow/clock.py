"""The engine's one clock. Timers, leases, deadlines and tests all read it.

Its source is the database server's clock wherever a process anchored it there
(``anchor``: workers, ``workflow_repair --loop`` and ``schedule_tick --loop`` do,
see ``store.dbclock``): every due decision (a timer's fire time, a lease's expiry, a
retry's back-off) is then made in the database's time, whatever this machine's
clock says, and elapsed time since the anchor is measured with the monotonic clock.
A process that did not anchor it reads this machine's clock.

Tests move it with ``durable_workflow.testing.travel`` / ``freeze`` (on top of the
source); production code never sets it.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

_lock = threading.Lock()
_offset = dt.timedelta(0)
_frozen: dt.datetime | None = None
#: The database's time and ``time.monotonic()`` when it was read (``None``: not anchored).
_anchor: tuple[dt.datetime, float] | None = None
#: How wrong this machine's clock is made to be (the reliability suite's clock skew).
_system_skew = dt.timedelta(0)


def now() -> dt.datetime:
    """The current engine time, timezone-aware UTC."""
    if _frozen is not None:
        return _frozen
    return source_now() + _offset


def source_now() -> dt.datetime:
    """The time the engine runs on before any test travel: the database's, extrapolated
    from the anchor with the monotonic clock, else this machine's."""
    anchor = _anchor
    if anchor is None:
        return system_now()
    at, monotonic = anchor
    return at + dt.timedelta(seconds=time.monotonic() - monotonic)


def system_now() -> dt.datetime:
    """This machine's clock (as skewed by ``skew_system_clock``)."""
    return dt.datetime.now(dt.UTC) + _system_skew


def anchor(database_time: dt.datetime, monotonic: float) -> None:
    """Run on the database's clock from now on: it read ``database_time`` at (or before)
    ``time.monotonic()`` was ``monotonic``. Taking the monotonic reading after the query
    returned makes the engine's time lag the database's by at most the round trip, never
    lead it."""
    global _anchor
    with _lock:
        _anchor = (database_time, monotonic)


def anchor_age() -> float | None:
    """Seconds since the last anchor (``None``: not anchored)."""
    anchor = _anchor
    return None if anchor is None else time.monotonic() - anchor[1]


def skew_system_clock(delta: dt.timedelta) -> None:
    """Make this machine's clock read ``delta`` off (ahead when positive): what a host
    without time synchronisation shows. Used by the reliability suite and tests; unlike
    ``advance`` it does not move an anchored engine clock."""
    global _system_skew
    with _lock:
        _system_skew = delta


def advance(delta: dt.timedelta) -> None:
    """Move the clock forward (or back) by ``delta``; used by tests."""
    global _offset, _frozen
    with _lock:
        if _frozen is not None:
            _frozen += delta
        else:
            _offset += delta


def freeze(at: dt.datetime | None = None) -> None:
    """Stop the clock at ``at`` (default: the current engine time)."""
    global _frozen
    with _lock:
        _frozen = at if at is not None else now()


def reset() -> None:
    """Back to this machine's clock: no travel, no anchor, no skew."""
    global _offset, _frozen, _anchor, _system_skew
    with _lock:
        _offset, _frozen = dt.timedelta(0), None
        _anchor, _system_skew = None, dt.timedelta(0)


def is_real() -> bool:
    return _frozen is None and _offset == dt.timedelta(0)


def snapshot() -> tuple[dt.timedelta, dt.datetime | None]:
    """The clock's current setting, for ``restore`` (used by the testing kit)."""
    return _offset, _frozen


def restore(state: tuple[dt.timedelta, dt.datetime | None]) -> None:
    global _offset, _frozen
    with _lock:
        _offset, _frozen = state
