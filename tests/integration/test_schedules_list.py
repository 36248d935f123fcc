"""``ScheduleManager.list``: descriptions, filtered and paged with an opaque cursor."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import clock
from durable_workflow.schedules import InvalidScheduleError, ScheduleManager

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def schedules():
    clock.freeze(dt.datetime(2026, 4, 10, tzinfo=dt.UTC))
    for index in range(7):
        ScheduleManager.create(
            schedule_id=f"s-{index}",
            workflow="tests.sleeper" if index % 2 else "tests.patterns.short-naps",
            cron_expression="0 * * * *",
            arguments=[1],
        )
    ScheduleManager.create(
        schedule_id="elsewhere",
        workflow="tests.sleeper",
        cron_expression="0 * * * *",
        arguments=[1],
        namespace="billing",
    )
    ScheduleManager.pause("s-3")
    ScheduleManager.delete("s-5")


def test_pages_follow_the_cursor_to_the_end(schedules):
    seen, cursor = [], None
    for _ in range(5):
        page = ScheduleManager.list(limit=2, cursor=cursor)
        seen += [d.schedule_id for d in page]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["s-0", "s-1", "s-2", "s-3", "s-4", "s-6"]  # deleted ones are left out


def test_filters(schedules):
    assert [d.schedule_id for d in ScheduleManager.list(status="paused")] == ["s-3"]
    assert [d.schedule_id for d in ScheduleManager.list(status="deleted")] == ["s-5"]
    both = ScheduleManager.list(status=["paused", "deleted"])
    assert [d.schedule_id for d in both] == ["s-3", "s-5"]
    sleepers = ScheduleManager.list(workflow="tests.sleeper")
    assert [d.schedule_id for d in sleepers] == ["s-1", "s-3"]
    billing = ScheduleManager.list(namespace="billing")
    assert [(d.schedule_id, d.namespace) for d in billing] == [("elsewhere", "billing")]
    first = ScheduleManager.list(limit=1).schedules[0]
    assert first.to_dict()["schedule_id"] == "s-0" and first.status == "active"


@pytest.mark.parametrize(
    "arguments",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": True},
        {"status": "asleep"},
        {"cursor": "not a cursor"},
        {"cursor": "x" * 5000},
        {"workflow": "no.such.workflow"},
    ],
)
def test_bad_arguments_are_refused(schedules, arguments):
    with pytest.raises(InvalidScheduleError):
        ScheduleManager.list(**arguments)
