"""A manual trigger always starts a run or records a skip with its reason (issue 21).

Defect reproduced first: ``trigger()`` at the instant of a scheduled fire took the
scheduled slot's instance id, the claim failed, and ``None`` came back with no
audit event and no skip reason (or the trigger took the slot and the scheduled
fire was lost).
"""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import clock
from durable_workflow.models import ScheduleFire, WorkflowRun
from durable_workflow.schedules import ScheduleManager

pytestmark = pytest.mark.django_db(transaction=True)

ONE = dt.datetime(2026, 4, 10, 1, 0, tzinfo=dt.UTC)


@pytest.fixture
def hourly():
    clock.freeze(ONE - dt.timedelta(minutes=30))

    def create(policy: str) -> None:
        ScheduleManager.create(
            schedule_id="hourly",
            workflow="tests.sleeper",
            cron_expression="0 * * * *",
            arguments=[864000],
            overlap_policy=policy,
        )

    return create


def audit() -> list[str]:
    return [e.event_type for e in ScheduleManager.history("hourly")][1:]


def test_a_trigger_after_the_scheduled_fire_of_the_same_instant_starts_a_run(hourly):
    hourly("allow_all")
    clock.freeze(ONE)
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "triggered"
    manual = ScheduleManager.trigger("hourly")
    assert manual is not None and manual != row["instance_id"]
    assert WorkflowRun.objects.filter(instance_id=manual).exists()
    assert audit() == ["ScheduleTriggered", "ScheduleTriggered"]
    assert ScheduleManager.describe("hourly").fires_count == 2


def test_a_trigger_before_the_scheduled_fire_of_the_same_instant_leaves_the_slot(hourly):
    hourly("allow_all")
    clock.freeze(ONE)
    manual = ScheduleManager.trigger("hourly")
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "triggered" and row["instance_id"] != manual
    assert row["instance_id"] == "schedule:hourly:20260410T010000Z"
    kinds = sorted(ScheduleFire.objects.values_list("kind", "status"))
    assert kinds == [("manual", "started"), ("tick", "started")]


def test_two_triggers_at_the_same_instant_start_two_runs(hourly):
    hourly("allow_all")
    clock.freeze(ONE + dt.timedelta(minutes=5))
    first = ScheduleManager.trigger("hourly")
    second = ScheduleManager.trigger("hourly")
    assert first and second and first != second
    assert audit() == ["ScheduleTriggered", "ScheduleTriggered"]


def test_a_trigger_the_policy_refuses_records_the_skip_and_its_reason(hourly):
    hourly("skip")
    clock.freeze(ONE)
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "triggered"
    assert ScheduleManager.trigger("hourly") is None
    assert audit() == ["ScheduleTriggered", "ScheduleTriggerSkipped"]
    described = ScheduleManager.describe("hourly")
    assert described.last_skip_reason == "overlap_policy_skip"
    assert described.skipped_trigger_count == 1
