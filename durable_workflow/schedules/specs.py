"""When a schedule fires: cron expressions in a timezone, fixed intervals, a window.

Cron expressions are matched against local wall-clock time in the schedule's
timezone. Across DST changes that gives the behaviour people expect of a daily
job: a wall time that does not exist (the spring-forward gap) fires at the same
instant as the wall time one offset earlier, i.e. shifted forward by the gap;
a wall time that exists twice (the fall-back overlap) fires once, at its first
occurrence. Intervals are absolute: ``epoch + n * every + offset``, with the
Unix epoch as the alignment point, whatever the timezone.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from croniter import CroniterBadDateError, croniter

from durable_workflow.schedules.errors import (
    InvalidCronExpressionError,
    InvalidScheduleError,
    InvalidTimezoneError,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)
_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_DURATION = re.compile(
    r"P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)S)?)?"
)
_UNIT_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
#: Enough to step over any DST overlap while looking for the next cron match.
_MAX_CRON_STEPS = 16


def parse_iso_duration(text: object, *, field: str) -> int:
    """Whole seconds of an ISO 8601 duration such as ``PT30M`` or ``P1DT6H``.

    Years and months are refused: an interval must have a fixed length.
    """
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None or text in ("P", "PT") or str(text).endswith("T"):
        raise InvalidScheduleError(
            f"{field} must be an ISO 8601 duration such as 'PT30M', 'PT1H' or 'P1D' "
            f"(weeks, days, hours, minutes, seconds), got {text!r}"
        )
    return sum(int(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v)


def validate_timezone(name: object) -> zoneinfo.ZoneInfo:
    if not isinstance(name, str) or not name:
        raise InvalidTimezoneError(f"timezone must be an IANA zone name, got {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidTimezoneError(f"unknown timezone {name!r}") from None


def validate_cron(expression: object) -> str:
    if not isinstance(expression, str):
        raise InvalidCronExpressionError(f"a cron expression must be a string, not {expression!r}")
    text = " ".join(expression.split())
    fields = text.split(" ")
    if not (len(fields) == 5 or (len(fields) == 1 and text.lower() in _MACROS)):
        raise InvalidCronExpressionError(
            f"cron expression {expression!r} must have 5 fields "
            "(minute hour day-of-month month day-of-week)"
        )
    if not croniter.is_valid(text):
        raise InvalidCronExpressionError(f"invalid cron expression {expression!r}")
    try:
        croniter(text, dt.datetime(2000, 1, 1)).get_next(dt.datetime)
    except CroniterBadDateError:
        raise InvalidCronExpressionError(
            f"cron expression {expression!r} never matches a real date"
        ) from None
    return text


@dataclass(frozen=True)
class Interval:
    every: int
    offset: int = 0

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        # Integer microseconds: a float of seconds since 1970 loses the last digits.
        elapsed = (moment - EPOCH) // _MICROSECOND - self.offset * 1_000_000
        steps = elapsed // (self.every * 1_000_000) + 1
        return EPOCH + dt.timedelta(seconds=steps * self.every + self.offset)


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated spec; ``as_dict()`` is the normalized form stored on the schedule."""

    cron_expressions: tuple[str, ...]
    intervals: tuple[Interval, ...]
    timezone: str
    raw_intervals: tuple[dict[str, str | None], ...] = ()
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None

    @classmethod
    def parse(cls, spec: Any) -> ScheduleSpec:
        if not isinstance(spec, dict):
            raise InvalidScheduleError(f"a schedule spec must be a dict, not {spec!r}")
        known = {"cron_expressions", "intervals", "timezone", "start_at", "end_at"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise InvalidScheduleError(f"unknown schedule spec keys: {', '.join(unknown)}")
        crons = spec.get("cron_expressions") or []
        if isinstance(crons, str) or not isinstance(crons, list | tuple):
            raise InvalidScheduleError("spec['cron_expressions'] must be a list of strings")
        intervals, raw = _parse_intervals(spec.get("intervals") or [])
        if not crons and not intervals:
            raise InvalidScheduleError("a schedule spec needs a cron expression or an interval")
        timezone = spec.get("timezone") or "UTC"
        validate_timezone(timezone)
        start_at, end_at = _instant(spec.get("start_at")), _instant(spec.get("end_at"))
        if start_at and end_at and end_at < start_at:
            raise InvalidScheduleError("spec['end_at'] is before spec['start_at']")
        return cls(
            cron_expressions=tuple(validate_cron(c) for c in crons),
            intervals=intervals,
            timezone=timezone,
            raw_intervals=raw,
            start_at=start_at,
            end_at=end_at,
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cron_expressions:
            out["cron_expressions"] = list(self.cron_expressions)
        if self.raw_intervals:
            out["intervals"] = [dict(item) for item in self.raw_intervals]
        out["timezone"] = self.timezone
        if self.start_at:
            out["start_at"] = self.start_at.isoformat()
        if self.end_at:
            out["end_at"] = self.end_at.isoformat()
        return out

    def next_after(self, moment: dt.datetime) -> dt.datetime | None:
        """The earliest canonical fire time strictly after ``moment`` (None: no more)."""
        if self.start_at and moment < self.start_at:
            moment = self.start_at - dt.timedelta(microseconds=1)
        zone = zoneinfo.ZoneInfo(self.timezone)
        candidates = [_next_cron(c, moment, zone) for c in self.cron_expressions]
        candidates += [interval.next_after(moment) for interval in self.intervals]
        found = min(candidates)
        if self.end_at and found > self.end_at:
            return None
        return found

    def occurrences(self, start: dt.datetime, end: dt.datetime) -> Iterator[dt.datetime]:
        """Canonical fire times in ``[start, end]``, both bounds included, in order."""
        moment = start - dt.timedelta(microseconds=1)
        while True:
            found = self.next_after(moment)
            if found is None or found > end:
                return
            yield found
            moment = found


def _next_cron(expression: str, moment: dt.datetime, zone: zoneinfo.ZoneInfo) -> dt.datetime:
    # Walk naive local wall times; map each to an instant with fold=0 (the first
    # of a repeated time, the pre-transition offset for a skipped one).
    wall = moment.astimezone(zone).replace(tzinfo=None)
    it = croniter(expression, wall)
    for _ in range(_MAX_CRON_STEPS):
        candidate = it.get_next(dt.datetime).replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
        if candidate > moment:
            return candidate
    raise AssertionError(f"no cron match for {expression!r} after {moment}")  # pragma: no cover


def _parse_intervals(items: Any) -> tuple[tuple[Interval, ...], tuple[dict[str, str | None], ...]]:
    if not isinstance(items, list | tuple):
        raise InvalidScheduleError("spec['intervals'] must be a list of {'every', 'offset'} dicts")
    parsed, raw = [], []
    for item in items:
        if not isinstance(item, dict) or "every" not in item or set(item) - {"every", "offset"}:
            raise InvalidScheduleError(f"an interval is {{'every': ..., 'offset': ...}}: {item!r}")
        every = parse_iso_duration(item["every"], field="interval 'every'")
        offset_text = item.get("offset")
        offset = 0 if offset_text is None else parse_iso_duration(offset_text, field="offset")
        if every < 1:
            raise InvalidScheduleError("an interval must be at least one second long")
        if offset >= every:
            raise InvalidScheduleError(
                f"interval offset {offset_text!r} must be shorter than every"
            )
        parsed.append(Interval(every=every, offset=offset))
        raw.append({"every": item["every"], "offset": offset_text})
    return tuple(parsed), tuple(raw)


def _instant(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise InvalidScheduleError(f"not an ISO 8601 date-time: {value!r}") from None
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise InvalidScheduleError(f"start_at/end_at must be timezone-aware: {value!r}")
    return value.astimezone(dt.UTC)
