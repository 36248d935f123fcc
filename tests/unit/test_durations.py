import datetime as dt

import pytest

from durable_workflow.engine.durations import add_months, to_seconds
from durable_workflow.exceptions import InvalidDurationError

JAN_31 = dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0),
        (5, 5),
        (-3, 0),
        (1.2, 2),
        (0.0001, 1),
        ("2 seconds", 2),
        ("2", 2),
        ("1 second", 1),
        ("90 secs", 90),
        ("2 minutes", 120),
        ("1 min", 60),
        ("1.5 hours", 5400),
        ("1 hour 30 minutes", 5400),
        ("1 hour, 30 minutes", 5400),
        ("3 days", 259200),
        ("2 weeks", 1209600),
        ("10s", 10),
        ("5m", 300),
        ("2h", 7200),
        (dt.timedelta(minutes=2), 120),
        (dt.timedelta(seconds=-10), 0),
        (dt.timedelta(milliseconds=1), 1),
    ],
)
def test_durations(value, seconds):
    assert to_seconds(value) == seconds


def test_calendar_months_clamp_to_month_end():
    assert add_months(JAN_31, 1) == dt.datetime(2026, 2, 28, 12, tzinfo=dt.UTC)
    assert to_seconds("1 month", now=JAN_31) == 28 * 86400
    assert to_seconds("1 year", now=JAN_31) == 365 * 86400
    assert to_seconds("2 months", now=dt.datetime(2026, 12, 15, tzinfo=dt.UTC)) == 62 * 86400


@pytest.mark.parametrize("bad", ["", "soon", "2 fortnights", "1.5 months", True, None, [1]])
def test_bad_durations(bad):
    with pytest.raises(InvalidDurationError):
        to_seconds(bad)


def test_non_finite_duration():
    with pytest.raises(InvalidDurationError):
        to_seconds(float("inf"))
