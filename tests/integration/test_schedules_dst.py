"""Daylight-saving transitions: a daily 02:30 schedule in Europe/Berlin, ticked through them."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from durable_workflow import clock
from durable_workflow.models import WorkflowInstance
from durable_workflow.schedules import ScheduleManager
from durable_workflow.schedules.specs import ScheduleSpec

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
UTC = dt.UTC


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def run_ticker(start: dt.datetime, end: dt.datetime, step_minutes: int = 30) -> list[dict]:
    """Tick every ``step_minutes`` of engine time from ``start`` to ``end``."""
    rows, moment = [], start
    while moment <= end:
        clock.freeze(moment)
        rows += ScheduleManager.tick()
        moment += dt.timedelta(minutes=step_minutes)
    return rows


def berlin_daily() -> None:
    ScheduleManager.create(
        schedule_id="berlin",
        workflow="tests.sleeper",
        cron_expression="30 2 * * *",
        arguments=[60],
        timezone="Europe/Berlin",
        overlap_policy="allow_all",
    )


def local(moment: dt.datetime) -> str:
    return moment.astimezone(BERLIN).strftime("%m-%d %H:%M %Z")


@pytest.mark.django_db(transaction=True)
def test_spring_forward_fires_once_on_the_short_day_shifted_past_the_gap():
    # On 29 March 2026 Berlin clocks jump from 02:00 CET to 03:00 CEST: 02:30 never happens.
    clock.freeze(utc(2026, 3, 27, 12, 0))
    berlin_daily()
    assert ScheduleManager.describe("berlin").next_fire_at == utc(2026, 3, 28, 1, 30)
    rows = run_ticker(utc(2026, 3, 27, 12, 0), utc(2026, 3, 30, 23, 0))
    assert [row["outcome"] for row in rows] == ["triggered"] * 3
    assert [local(row["occurrence_time"]) for row in rows] == [
        "03-28 02:30 CET",
        "03-29 03:30 CEST",  # the missing 02:30, one gap later
        "03-30 02:30 CEST",
    ]
    assert [row["instance_id"] for row in rows] == [
        "schedule:berlin:20260328T013000Z",
        "schedule:berlin:20260329T013000Z",
        "schedule:berlin:20260330T003000Z",
    ]
    assert WorkflowInstance.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_fall_back_fires_once_on_the_long_day_at_the_first_0230():
    # On 25 October 2026 Berlin clocks go from 03:00 CEST back to 02:00 CET: 02:30 happens twice.
    clock.freeze(utc(2026, 10, 23, 12, 0))
    berlin_daily()
    rows = run_ticker(utc(2026, 10, 23, 12, 0), utc(2026, 10, 26, 23, 0), step_minutes=15)
    assert [local(row["occurrence_time"]) for row in rows] == [
        "10-24 02:30 CEST",
        "10-25 02:30 CEST",  # the first of the two 02:30s
        "10-26 02:30 CET",
    ]
    assert [row["occurrence_time"] for row in rows] == [
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]
    assert WorkflowInstance.objects.count() == 3


def test_wall_clock_cron_and_absolute_intervals_across_the_transitions():
    hourly = ScheduleSpec.parse({"cron_expressions": ["0 * * * *"], "timezone": "Europe/Berlin"})
    short_day = list(hourly.occurrences(utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 21, 59)))
    assert len(short_day) == 23 and len(set(short_day)) == 23  # no hour fires twice
    long_day = list(hourly.occurrences(utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 22, 59)))
    assert len(long_day) == 24  # the repeated 02:00 CET is not matched again
    assert utc(2026, 10, 25, 1, 0) not in long_day

    every_hour = ScheduleSpec.parse({"intervals": [{"every": "PT1H"}], "timezone": "Europe/Berlin"})
    assert (
        len(list(every_hour.occurrences(utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 22, 59)))) == 25
    )


def test_interval_offsets_align_to_the_unix_epoch():
    spec = ScheduleSpec.parse({"intervals": [{"every": "P1D", "offset": "PT2H30M"}]})
    assert spec.next_after(utc(2026, 4, 10, 2, 30)) == utc(2026, 4, 11, 2, 30)
    assert spec.next_after(utc(2026, 4, 10, 2, 29, 59)) == utc(2026, 4, 10, 2, 30)
    weekly = ScheduleSpec.parse({"intervals": [{"every": "P1W"}]})
    assert weekly.next_after(utc(2026, 4, 10)) == utc(2026, 4, 16)  # epoch was a Thursday
