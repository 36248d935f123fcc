"""The engine's one clock. Timers, leases, deadlines and tests all read it.

Tests move it with ``durable_workflow.testing.travel`` / ``freeze``; production
code never sets it.
"""

from __future__ import annotations

import datetime as dt
import threading

_lock = threading.Lock()
_offset = dt.timedelta(0)
_frozen: dt.datetime | None = None


def now() -> dt.datetime:
    """The current engine time, timezone-aware UTC."""
    if _frozen is not None:
        return _frozen
    return dt.datetime.now(dt.UTC) + _offset


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
    """Back to the wall clock."""
    global _offset, _frozen
    with _lock:
        _offset, _frozen = dt.timedelta(0), None


def is_real() -> bool:
    return _frozen is None and _offset == dt.timedelta(0)


def snapshot() -> tuple[dt.timedelta, dt.datetime | None]:
    """The clock's current setting, for ``restore`` (used by the testing kit)."""
    return _offset, _frozen


def restore(state: tuple[dt.timedelta, dt.datetime | None]) -> None:
    global _offset, _frozen
    with _lock:
        _offset, _frozen = state
