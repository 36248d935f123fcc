"""Turning the many ways of writing a duration into seconds (to the millisecond)."""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re

from durable_workflow.exceptions import InvalidDurationError

_UNIT_SECONDS = {
    "millisecond": 0.001,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}
_UNIT_ALIASES = {
    "ms": "millisecond",
    "msec": "millisecond",
    "msecs": "millisecond",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "d": "day",
    "w": "week",
    "mo": "month",
    "y": "year",
    "yr": "year",
    "yrs": "year",
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*,?")

Duration = int | float | str | dt.timedelta

#: Timers and wait deadlines resolve to the millisecond: a duration is rounded up to it.
RESOLUTION = 0.001


def _unit(word: str) -> str:
    word = word.lower()
    word = _UNIT_ALIASES.get(word, word)
    if word.endswith("s") and word[:-1] in (*_UNIT_SECONDS, "month", "year"):
        word = word[:-1]
    if word not in _UNIT_SECONDS and word not in ("month", "year"):
        raise InvalidDurationError(f"unknown duration unit {word!r}")
    return word


def add_months(moment: dt.datetime, months: int) -> dt.datetime:
    """Calendar month arithmetic that clamps to the last day of a short month."""
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def to_seconds(duration: Duration, *, now: dt.datetime | None = None) -> int:
    """Whole seconds for ``duration``; negatives clamp to 0, fractions round up.

    Month and year units are calendar-aware relative to ``now`` (a workflow
    passes its deterministic ``now()``), so "1 month" from 31 January lands on
    the last day of February.
    """
    return math.ceil(to_delay(duration, now=now))


def to_delay(duration: Duration, *, now: dt.datetime | None = None) -> int | float:
    """Seconds for a timer or a wait deadline, rounded up to the millisecond: an int
    when whole (``60``), a float otherwise (``0.1``). Negatives clamp to 0."""
    if isinstance(duration, bool):
        raise InvalidDurationError("a duration cannot be a boolean")
    if isinstance(duration, dt.timedelta):
        return _clamp(duration.total_seconds())
    if isinstance(duration, int | float):
        if isinstance(duration, float) and not math.isfinite(duration):
            raise InvalidDurationError("a duration must be finite")
        return _clamp(duration)
    if isinstance(duration, str):
        return _parse_string(duration, now)
    raise InvalidDurationError(f"cannot use {type(duration).__name__} as a duration")


def whole_or_fraction(seconds: float) -> int | float:
    """``60.0`` as ``60`` (what histories always held), ``0.1`` as is."""
    return int(seconds) if float(seconds).is_integer() else float(seconds)


#: Longer than any real wait (100 years), short enough for every datetime computation.
MAX_SECONDS = 100 * 366 * 86400


def _clamp(seconds: float) -> int | float:
    # Rounded up to the millisecond (a tiny epsilon keeps 0.1 from becoming 0.101).
    value = max(0.0, math.ceil(seconds / RESOLUTION - 1e-9) * RESOLUTION)
    if value > MAX_SECONDS:
        raise InvalidDurationError(f"a duration may be at most 100 years, got {value} seconds")
    return whole_or_fraction(round(value, 3))


def _parse_string(text: str, now: dt.datetime | None) -> int | float:
    stripped = text.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", stripped):
        return _clamp(float(stripped))
    position, total, calendar_months = 0, 0.0, 0
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if not match or match.end() == position:
            raise InvalidDurationError(f"cannot parse duration {text!r}")
        amount, unit = float(match.group(1)), _unit(match.group(2))
        if unit in ("month", "year"):
            if amount != int(amount):
                raise InvalidDurationError(f"fractional {unit}s are not supported: {text!r}")
            calendar_months += int(amount) * (12 if unit == "year" else 1)
        else:
            total += amount * _UNIT_SECONDS[unit]
        position = match.end()
    if not stripped:
        raise InvalidDurationError("empty duration")
    if calendar_months:
        base = now or dt.datetime.now(dt.UTC)
        total += (add_months(base, calendar_months) - base).total_seconds()
    return _clamp(total)
