"""Overlap policies, buffer draining and the catch-up rule, with the engine clock moved."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.models import ScheduleFire, ScheduleHistoryEvent, WorkflowCommand
from durable_workflow.schedules import ScheduleManager

pytestmark = pytest.mark.django_db(transaction=True)

UTC = dt.UTC


def at(hour: int, minute: int = 0, *, day: int = 10) -> dt.datetime:
    return dt.datetime(2026, 4, day, hour, minute, tzinfo=UTC)


def slot(hour: int, *, day: int = 10) -> str:
    return f"schedule:hourly:202604{day:02d}T{hour:02d}0000Z"


@pytest.fixture
def hourly():
    """An hourly schedule created at 00:30 that starts a sleeper for ``seconds``."""
    clock.freeze(at(0, 30))

    def create(policy: str, seconds: int) -> None:
        ScheduleManager.create(
            schedule_id="hourly",
            workflow="tests.sleeper",
            cron_expression="0 * * * *",
            arguments=[seconds],
            overlap_policy=policy,
        )

    return create


def tick_at(moment: dt.datetime, inline) -> list[dict]:
    clock.freeze(moment)
    rows = ScheduleManager.tick()
    inline.run()  # started runs take their first workflow task (and wait on their timer)
    return rows


def status(instance_id: str) -> str:
    return WorkflowStub.load(instance_id).status()


def outcomes(rows: list[dict]) -> list[tuple[str, str | None]]:
    return [(r["outcome"], r["instance_id"]) for r in rows]


def test_skip_records_the_skipped_fire_and_fires_again_once_the_run_closed(hourly, inline):
    hourly("skip", 5400)  # each run sleeps 90 minutes
    assert outcomes(tick_at(at(1), inline)) == [("triggered", slot(1))]
    [skipped] = tick_at(at(2), inline)
    assert skipped["outcome"] == "skipped" and skipped["reason"] == "overlap_policy_skip"
    assert skipped["instance_id"] is None and skipped["next_fire_at"] == at(3)
    described = ScheduleManager.describe("hourly")
    assert described.last_skip_reason == "overlap_policy_skip"
    assert described.last_skipped_at == at(2) and described.skipped_trigger_count == 1
    fire = ScheduleFire.objects.get(instance_id=slot(2))
    assert fire.status == "skipped" and fire.skip_reason == "overlap_policy_skip"
    event = ScheduleHistoryEvent.objects.get(event_type="ScheduleTriggerSkipped")
    assert event.payload == {
        "reason": "overlap_policy_skip",
        "skipped_trigger_count": 1,
        "last_skipped_at": "2026-04-10T02:00:00.000000Z",
    }
    clock.freeze(at(3))
    inline.run()  # the 01:00 run's timer (due 02:30) fires; the run completes
    assert status(slot(1)) == "completed"
    assert outcomes(tick_at(at(3), inline)) == [("triggered", slot(3))]


def test_buffer_one_keeps_one_fire_and_drains_it_when_the_run_closes(hourly, inline):
    hourly("buffer_one", 9000)  # 150 minutes: the 01:00 run ends at 03:30
    tick_at(at(1), inline)
    [buffered] = tick_at(at(2), inline)
    assert buffered["outcome"] == "buffered" and buffered["instance_id"] == slot(2)
    assert ScheduleManager.describe("hourly").buffered_count == 1
    assert not WorkflowCommand.objects.filter(instance_id=slot(2)).exists()  # not started yet
    [full] = tick_at(at(3), inline)
    assert (full["outcome"], full["reason"]) == ("skipped", "overlap_policy_skip")
    assert tick_at(at(3, 20), inline) == []  # still running, nothing due

    clock.freeze(at(3, 30))
    inline.run()
    assert status(slot(1)) == "completed"
    # The buffered fire starts on the next tick, although nothing is due at 03:30.
    [drained] = tick_at(at(3, 30), inline)
    assert drained["outcome"] == "buffer_drained"
    assert drained["instance_id"] == slot(2) and drained["occurrence_time"] == at(2)
    assert status(slot(2)) == "waiting"
    described = ScheduleManager.describe("hourly")
    assert described.buffered_count == 0 and described.fires_count == 2
    assert described.latest_instance_id == slot(2) and described.next_fire_at == at(4)
    triggered = ScheduleHistoryEvent.objects.filter(event_type="ScheduleTriggered")
    last = triggered.order_by("-sequence").first().payload
    assert last["trigger_number"] == 2 and last["occurrence_time"] == "2026-04-10T02:00:00.000000Z"
    assert tick_at(at(3, 40), inline) == []
    assert ScheduleFire.objects.get(instance_id=slot(2)).status == "started"


def test_buffer_all_drains_every_fire_in_order_one_run_at_a_time(hourly, inline):
    hourly("buffer_all", 5400)
    tick_at(at(1), inline)  # the 01:00 run sleeps until 02:30
    for hour in (2, 3, 4):  # no task runs meanwhile: its timer waits, the run stays open
        clock.freeze(at(hour))
        [row] = ScheduleManager.tick()
        assert (row["outcome"], row["instance_id"]) == ("buffered", slot(hour))
    assert ScheduleManager.describe("hourly").buffered_count == 3

    clock.freeze(at(4, 10))
    inline.run()  # now the overdue timer fires and the 01:00 run completes
    assert status(slot(1)) == "completed"
    assert outcomes(tick_at(at(4, 10), inline)) == [("buffer_drained", slot(2))]
    assert tick_at(at(4, 20), inline) == []  # the 02:00 run sleeps until 05:40

    clock.freeze(at(5, 45))
    inline.run()
    # First the next buffered fire drains, then the due 05:00 fire queues behind the rest.
    assert outcomes(tick_at(at(5, 45), inline)) == [
        ("buffer_drained", slot(3)),
        ("buffered", slot(5)),
    ]
    pending = ScheduleFire.objects.filter(status="buffered").order_by("occurrence_time")
    assert [f.instance_id for f in pending] == [slot(4), slot(5)]
    assert ScheduleManager.describe("hourly").skipped_trigger_count == 0


def test_allow_all_starts_regardless(hourly, inline):
    hourly("allow_all", 864000)
    tick_at(at(1), inline)
    tick_at(at(2), inline)
    assert status(slot(1)) == "waiting" and status(slot(2)) == "waiting"
    payload = ScheduleHistoryEvent.objects.filter(event_type="ScheduleTriggered").last().payload
    assert payload["effective_overlap_policy"] == "allow_all"


def test_cancel_other_cancels_the_previous_run_then_starts(hourly, inline):
    hourly("cancel_other", 864000)
    tick_at(at(1), inline)
    clock.freeze(at(2))
    assert outcomes(ScheduleManager.tick()) == [("triggered", slot(2))]
    cancel = WorkflowCommand.objects.get(instance_id=slot(1), command_type="cancel")
    assert cancel.source == "schedule" and cancel.status == "accepted"
    assert WorkflowStub.load(slot(1)).running()  # cancellation is cooperative...
    inline.run()
    assert status(slot(1)) == "cancelled"  # ...and lands at the run's next workflow task
    assert status(slot(2)) == "waiting"


def test_terminate_other_terminates_the_previous_run_at_once(hourly, inline):
    hourly("terminate_other", 864000)
    tick_at(at(1), inline)
    clock.freeze(at(2))
    assert outcomes(ScheduleManager.tick()) == [("triggered", slot(2))]
    assert status(slot(1)) == "terminated"
    command = WorkflowCommand.objects.get(instance_id=slot(1), command_type="terminate")
    assert command.source == "schedule"
    inline.run()
    assert status(slot(2)) == "waiting"


def test_after_a_three_day_gap_one_fire_runs_and_the_rest_are_dropped(hourly, inline):
    hourly("allow_all", 60)
    tick_at(at(1), inline)
    # No ticker runs for three days: 02:00 on the 10th through 01:00 on the 13th are missed.
    [row] = tick_at(at(1, 20, day=13), inline)
    assert row["outcome"] == "triggered"
    assert row["occurrence_time"] == at(2)  # the overdue next_fire_at
    assert row["instance_id"] == slot(2)
    assert row["next_fire_at"] == at(2, day=13)  # resumes from the clock
    assert tick_at(at(1, 30, day=13), inline) == []
    described = ScheduleManager.describe("hourly")
    assert described.fires_count == 2 and described.skipped_trigger_count == 0
    assert not ScheduleHistoryEvent.objects.filter(event_type="ScheduleTriggerSkipped").exists()

    # Backfill recovers the dropped occurrences and never re-runs one that fired live.
    rows = ScheduleManager.backfill("hourly", at(1), at(1, 30, day=13))
    assert len(rows) == 73
    assert [r["outcome"] for r in rows[:2]] == ["already_fired", "already_fired"]
    assert rows[1]["instance_id"] == slot(2)
    assert {r["outcome"] for r in rows[2:]} == {"triggered"}
    assert rows[2]["instance_id"] == "schedule:hourly:backfill:20260410T030000Z"


def test_a_paused_schedule_keeps_its_buffer_until_it_resumes(hourly, inline):
    hourly("buffer_one", 5400)
    tick_at(at(1), inline)
    [row] = tick_at(at(2), inline)
    assert row["outcome"] == "buffered"
    ScheduleManager.pause("hourly")
    clock.freeze(at(2, 40))
    inline.run()
    assert status(slot(1)) == "completed"
    assert ScheduleManager.tick() == []
    ScheduleManager.resume("hourly")
    assert outcomes(tick_at(at(2, 41), inline)) == [("buffer_drained", slot(2))]


def test_manual_trigger_follows_the_policy(hourly, inline):
    hourly("skip", 864000)
    clock.freeze(at(0, 40))
    first = ScheduleManager.trigger("hourly")
    assert first == "schedule:hourly:manual:20260410T004000Z:1"
    inline.run()
    # Another trigger at the same instant is another run, never the same slot.
    assert ScheduleManager.trigger("hourly", overlap_policy="allow_all") == (
        "schedule:hourly:manual:20260410T004000Z:2"
    )
    clock.freeze(at(0, 41))
    assert ScheduleManager.trigger("hourly") is None
    assert ScheduleManager.describe("hourly").last_skip_reason == "overlap_policy_skip"
    clock.freeze(at(0, 42))
    assert ScheduleManager.trigger("hourly", overlap_policy="allow_all") == (
        "schedule:hourly:manual:20260410T004200Z:4"
    )
    assert ScheduleManager.describe("hourly").next_fire_at == at(1)
