"""Moving the engine's clock in tests: ``travel``, ``travel_to`` and ``freeze``.

Each works as a plain call (the clock stays moved until ``reset()``, which
the pytest fixtures and ``WorkflowTestCase`` do after every test) and as a
context manager (the clock is put back when the block ends).

Only the engine clock (``durable_workflow.clock``) moves: timers, leases and
deadlines read it, and so does ``dw.now()`` through history. Moving time
never runs anything by itself; call ``WorkflowStub.run_ready_tasks()`` to run
what became due, exactly as the spec's testing guide does.
"""

from __future__ import annotations

import datetime as dt

from durable_workflow import clock


def _state() -> tuple[dt.timedelta, dt.datetime | None]:
    return clock.snapshot()


def _put_back(state: tuple[dt.timedelta, dt.datetime | None]) -> None:
    clock.restore(state)


class ClockChange:
    """A change of the engine clock, undone when used as a context manager."""

    def __init__(self, before: tuple[dt.timedelta, dt.datetime | None]) -> None:
        self._before = before

    def __enter__(self) -> ClockChange:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _put_back(self._before)

    def __repr__(self) -> str:
        return f"<ClockChange now={clock.now().isoformat()}>"


def travel(
    *,
    seconds: float = 0,
    minutes: float = 0,
    hours: float = 0,
    days: float = 0,
    weeks: float = 0,
) -> ClockChange:
    """Move the engine clock forward (negative values move it back)."""
    delta = dt.timedelta(seconds=seconds, minutes=minutes, hours=hours, days=days, weeks=weeks)
    before = _state()
    clock.advance(delta)
    return ClockChange(before)


def travel_to(moment: dt.datetime) -> ClockChange:
    """Set the engine clock to ``moment`` (aware); it keeps ticking unless frozen."""
    if moment.tzinfo is None:
        raise ValueError("travel_to() needs a timezone-aware datetime")
    before = _state()
    if before[1] is not None:
        clock.freeze(moment)
    else:
        clock.advance(moment - clock.now())
    return ClockChange(before)


def freeze(at: dt.datetime | None = None) -> ClockChange:
    """Stop the engine clock at ``at`` (default: now); ``travel`` still moves it."""
    if at is not None and at.tzinfo is None:
        raise ValueError("freeze() needs a timezone-aware datetime")
    before = _state()
    clock.freeze(at)
    return ClockChange(before)


def reset() -> None:
    """Back to the wall clock."""
    clock.reset()


def now() -> dt.datetime:
    """The engine's current time."""
    return clock.now()


class WorkflowClock:
    """The ``workflow_clock`` fixture: the functions above, as methods."""

    travel = staticmethod(travel)
    travel_to = staticmethod(travel_to)
    freeze = staticmethod(freeze)
    reset = staticmethod(reset)
    now = staticmethod(now)
