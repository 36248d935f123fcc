"""Schedules: definition, validation, lifecycle, audit stream, max_runs, trigger, backfill."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import (
    ConfigurationError,
    DurableWorkflowError,
    InvalidNamespaceError,
    WorkflowStub,
    clock,
)
from durable_workflow.models import (
    ScheduleFire,
    ScheduleHistoryEvent,
    WorkflowCommand,
    WorkflowInstance,
    WorkflowRun,
    WorkflowSchedule,
)
from durable_workflow.schedules import (
    CommandContext,
    InvalidCronExpressionError,
    InvalidScheduleError,
    InvalidTimezoneError,
    ScheduleAlreadyExistsError,
    ScheduleDeletedError,
    ScheduleManager,
    ScheduleNotFoundError,
    ScheduleOverlapPolicy,
    UnknownScheduleWorkflowError,
)
from tests.testapp.workflows import Sleeper

pytestmark = pytest.mark.django_db(transaction=True)

UTC = dt.UTC
START = dt.datetime(2026, 4, 10, 0, 0, tzinfo=UTC)


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def events(schedule_id: str) -> list[tuple[int, str]]:
    return [(e.sequence, e.event_type) for e in ScheduleManager.history(schedule_id)]


def travel_to(moment: dt.datetime) -> None:
    clock.freeze(moment)


@pytest.fixture
def frozen():
    clock.freeze(START)


def daily(schedule_id: str = "nightly", **options):
    options.setdefault("arguments", [864000])
    return ScheduleManager.create(
        schedule_id=schedule_id, workflow="tests.sleeper", cron_expression="0 2 * * *", **options
    )


# ------------------------------------------------------------------ definition
def test_create_computes_the_next_fire_time_in_the_schedule_timezone(frozen):
    schedule = daily(timezone="America/New_York", notes="2 AM Eastern", labels={"team": "ops"})
    assert schedule.status == "active"
    assert schedule.spec == {"cron_expressions": ["0 2 * * *"], "timezone": "America/New_York"}
    assert schedule.next_fire_at == at(2026, 4, 10, 6, 0)  # 02:00 EDT
    assert schedule.note == "2 AM Eastern" and schedule.overlap_policy == "skip"
    assert schedule.action["workflow_type"] == "tests.sleeper"
    assert schedule.action["input"] == [864000]
    assert schedule.fires_count == 0 and schedule.latest_instance_id is None
    assert events("nightly") == [(1, "ScheduleCreated")]
    created = ScheduleHistoryEvent.objects.get(schedule_id="nightly").payload
    assert set(created) == {"spec", "action", "overlap_policy", "next_fire_at"}
    assert created["next_fire_at"] == "2026-04-10T06:00:00.000000Z"
    described = ScheduleManager.describe("nightly").to_dict()
    assert described["next_fire_at"] == "2026-04-10T06:00:00.000000Z"
    assert described["note"] == "2 AM Eastern"


def test_a_workflow_class_and_a_named_argument_map_are_accepted(frozen):
    schedule = ScheduleManager.create(
        schedule_id="by-class",
        workflow=Sleeper,
        cron_expression="*/5 * * * *",
        arguments={"seconds": 30},
    )
    assert schedule.action["workflow_type"] == "tests.sleeper"
    assert schedule.action["workflow_class"] == "tests.testapp.workflows.Sleeper"
    assert schedule.action["input"] == [30]
    assert schedule.next_fire_at == at(2026, 4, 10, 0, 5)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"cron_expression": "not a cron"}, InvalidCronExpressionError),
        ({"cron_expression": "0 0 2 * * *"}, InvalidCronExpressionError),  # six fields
        ({"cron_expression": "61 * * * *"}, InvalidCronExpressionError),
        ({"cron_expression": "0 0 30 2 *"}, InvalidCronExpressionError),  # never matches
        ({"timezone": "Mars/Olympus_Mons"}, InvalidTimezoneError),
        ({"workflow": "tests.no-such-workflow"}, UnknownScheduleWorkflowError),
        ({"overlap_policy": "sometimes"}, InvalidScheduleError),
        ({"jitter_seconds": -1}, InvalidScheduleError),
        ({"max_runs": 0}, InvalidScheduleError),
        ({"schedule_id": "has spaces"}, InvalidScheduleError),
    ],
)
def test_bad_input_is_rejected_at_creation_and_writes_nothing(frozen, options, error):
    values = {
        "schedule_id": "bad",
        "workflow": "tests.sleeper",
        "cron_expression": "0 2 * * *",
        **options,
    }
    with pytest.raises(error) as caught:
        ScheduleManager.create(**values)
    assert isinstance(caught.value, ConfigurationError | DurableWorkflowError)
    assert isinstance(caught.value, InvalidScheduleError)
    assert not WorkflowSchedule.objects.exists()
    assert not ScheduleHistoryEvent.objects.exists()


def test_bad_specs_are_rejected(frozen):
    action = {"workflow_type": "tests.sleeper", "input": [1]}
    for spec in (
        {},
        {"intervals": [{"every": "PT0S"}]},
        {"intervals": [{"every": "P1M"}]},  # months have no fixed length
        {"intervals": [{"every": "PT1H", "offset": "PT2H"}]},
        {"intervals": [{"every": "30 minutes"}]},
        {"cron_expressions": "0 * * * *"},
        {"cron_expressions": ["0 * * * *"], "colour": "blue"},
        {"cron_expressions": ["0 * * * *"], "start_at": "2026-01-01T00:00:00"},  # naive
    ):
        with pytest.raises(InvalidScheduleError):
            ScheduleManager.create_from_spec(schedule_id="bad", spec=spec, action=action)
    with pytest.raises(InvalidScheduleError):
        ScheduleManager.create_from_spec(
            schedule_id="bad", spec={"intervals": [{"every": "PT1H"}]}, action={"input": []}
        )
    with pytest.raises(UnknownScheduleWorkflowError):
        ScheduleManager.create_from_spec(
            schedule_id="bad",
            spec={"intervals": [{"every": "PT1H"}]},
            action={"workflow_type": "nope"},
        )
    assert not WorkflowSchedule.objects.exists()


def test_schedule_ids_are_unique_per_namespace(frozen):
    daily("dup")
    with pytest.raises(ScheduleAlreadyExistsError):
        daily("dup")
    other = daily("dup", namespace="billing")
    assert other.namespace == "billing"
    assert ScheduleManager.find_by_schedule_id("dup", namespace="billing").namespace == "billing"
    assert ScheduleManager.find_by_schedule_id("dup").namespace == "default"
    assert ScheduleManager.find_by_schedule_id("missing") is None
    with pytest.raises(ScheduleNotFoundError):
        ScheduleManager.describe("missing")
    assert daily("dup", namespace="Shipping").namespace == "shipping"
    for bad in ("a" * 65, "a/b", "x..y"):
        with pytest.raises(InvalidNamespaceError):
            daily("dup", namespace=bad)


def test_intervals_with_an_offset_and_mixed_specs(frozen):
    hourly = ScheduleManager.create_from_spec(
        schedule_id="offset-hourly",
        spec={"intervals": [{"every": "PT1H", "offset": "PT5M"}]},
        action={"workflow_type": "tests.sleeper", "input": [10]},
    )
    assert hourly.next_fire_at == at(2026, 4, 10, 0, 5)
    assert hourly.spec["intervals"] == [{"every": "PT1H", "offset": "PT5M"}]
    mixed = ScheduleManager.create_from_spec(
        schedule_id="mixed",
        spec={
            "cron_expressions": ["0 12 * * *"],
            "intervals": [{"every": "PT6H"}],
            "timezone": "America/Chicago",
        },
        action={"workflow_class": "tests.testapp.workflows.Sleeper", "input": [10]},
    )
    # 00:00 UTC is 19:00 CDT; the 6-hour interval (06:00 UTC) beats noon Chicago (17:00 UTC).
    assert mixed.next_fire_at == at(2026, 4, 10, 6, 0)
    travel_to(at(2026, 4, 10, 14, 0))
    ScheduleManager.tick()
    assert ScheduleManager.describe("mixed").next_fire_at == at(2026, 4, 10, 17, 0)


def test_a_window_bounds_the_fires(frozen):
    ScheduleManager.create_from_spec(
        schedule_id="window",
        spec={
            "cron_expressions": ["0 * * * *"],
            "start_at": "2026-04-10T05:00:00+00:00",
            "end_at": "2026-04-10T06:00:00+00:00",
        },
        action={"workflow_type": "tests.sleeper", "input": [1]},
        overlap_policy="allow_all",
    )
    assert ScheduleManager.describe("window").next_fire_at == at(2026, 4, 10, 5, 0)
    travel_to(at(2026, 4, 10, 5, 0))
    ScheduleManager.tick()
    assert ScheduleManager.describe("window").next_fire_at == at(2026, 4, 10, 6, 0)
    travel_to(at(2026, 4, 10, 6, 0))
    ScheduleManager.tick()
    assert ScheduleManager.describe("window").next_fire_at is None
    assert ScheduleManager.describe("window").fires_count == 2


# ------------------------------------------------------------------- firing
def test_a_tick_starts_the_run_with_a_deterministic_id_and_the_schedule_defaults(frozen, inline):
    daily(
        labels={"team": "ops"},
        memo={"origin": "scheduled"},
        search_attributes={"tenant_id": "42"},
        queue="nightly-queue",
    )
    assert ScheduleManager.tick() == []  # nothing due yet
    travel_to(at(2026, 4, 10, 2, 0, 30))
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "triggered"
    assert row["instance_id"] == "schedule:nightly:20260410T020000Z"
    assert row["occurrence_time"] == at(2026, 4, 10, 2, 0)
    assert row["last_fired_at"] == at(2026, 4, 10, 2, 0, 30)
    assert row["next_fire_at"] == at(2026, 4, 11, 2, 0)
    run = WorkflowRun.objects.get(instance_id=row["instance_id"])
    assert str(run.id) == row["run_id"]
    assert run.labels == {"team": "ops"} and run.memo == {"origin": "scheduled"}
    assert run.search_attributes == {"tenant_id": "42"}
    assert run.queue == "nightly-queue"
    command = WorkflowCommand.objects.get(run=run, command_type="start")
    assert command.source == "schedule"
    lineage = command.payload["schedule"]
    assert lineage["schedule_id"] == "nightly" and lineage["trigger_number"] == 1
    assert lineage["occurrence_time"] == "2026-04-10T02:00:00.000000Z"
    assert lineage["cron_expression"] == "0 2 * * *" and lineage["timezone"] == "UTC"
    inline.run()
    assert WorkflowStub.load(row["instance_id"]).status() == "waiting"

    assert ScheduleManager.tick() == []  # the slot fired once; the next is tomorrow
    described = ScheduleManager.describe("nightly")
    assert described.fires_count == 1
    assert described.latest_instance_id == row["instance_id"]
    assert events("nightly") == [(1, "ScheduleCreated"), (2, "ScheduleTriggered")]
    triggered = ScheduleHistoryEvent.objects.get(event_type="ScheduleTriggered")
    assert triggered.payload == {
        "workflow_instance_id": row["instance_id"],
        "workflow_run_id": row["run_id"],
        "outcome": "started_new",
        "effective_overlap_policy": "skip",
        "trigger_number": 1,
        "occurrence_time": "2026-04-10T02:00:00.000000Z",
    }
    assert triggered.workflow_instance_id == row["instance_id"]
    assert str(triggered.workflow_run_id) == row["run_id"]


def test_manual_trigger_starts_now_and_keeps_the_cadence(frozen):
    daily(overlap_policy=ScheduleOverlapPolicy.ALLOW_ALL)
    travel_to(at(2026, 4, 10, 1, 15, 0, 250000))
    instance_id = ScheduleManager.trigger("nightly")
    assert instance_id == "schedule:nightly:manual:20260410T011500.250000Z:1"
    assert WorkflowInstance.objects.filter(instance_id=instance_id).exists()
    described = ScheduleManager.describe("nightly")
    assert described.next_fire_at == at(2026, 4, 10, 2, 0)
    assert described.fires_count == 1
    fire = ScheduleFire.objects.get(instance_id=instance_id)
    assert fire.kind == "manual" and fire.status == "started"


def test_command_context_is_recorded_only_when_given(frozen):
    context = CommandContext(principal="ops@example.com", request_id="req-1", source="admin")
    daily(context=context)
    ScheduleManager.pause("nightly", reason="maintenance")
    created, paused = ScheduleHistoryEvent.objects.order_by("sequence")
    assert created.payload["command_context"] == {
        "principal": "ops@example.com",
        "request_id": "req-1",
        "source": "admin",
    }
    assert "command_context" not in paused.payload


# ------------------------------------------------------------------ lifecycle
def test_pause_stops_fires_and_resume_recomputes_from_now(frozen):
    daily(jitter_seconds=0)
    paused = ScheduleManager.pause("nightly", reason="maintenance")
    assert paused.status == "paused" and paused.paused_at == START
    ScheduleManager.pause("nightly")  # already paused: nothing happens
    travel_to(at(2026, 4, 12, 12, 0))
    assert ScheduleManager.tick() == []
    assert not WorkflowInstance.objects.exists()
    resumed = ScheduleManager.resume("nightly")
    assert resumed.status == "active"
    assert resumed.next_fire_at == at(2026, 4, 13, 2, 0)  # from now, nothing caught up
    assert ScheduleManager.tick() == []
    assert events("nightly") == [
        (1, "ScheduleCreated"),
        (2, "SchedulePaused"),
        (3, "ScheduleResumed"),
    ]
    paused_event = ScheduleHistoryEvent.objects.get(event_type="SchedulePaused").payload
    assert paused_event == {"reason": "maintenance", "paused_at": "2026-04-10T00:00:00.000000Z"}
    resumed_event = ScheduleHistoryEvent.objects.get(event_type="ScheduleResumed").payload
    assert resumed_event == {"next_fire_at": "2026-04-13T02:00:00.000000Z"}
    travel_to(at(2026, 4, 13, 2, 0))
    assert [r["outcome"] for r in ScheduleManager.tick()] == ["triggered"]


def test_update_recalculates_the_next_fire_time(frozen):
    daily()
    updated = ScheduleManager.update(
        "nightly",
        cron_expression="30 3 * * *",
        timezone="America/Chicago",
        overlap_policy="allow_all",
        notes="Moved to 3:30 AM CT.",
    )
    assert updated.spec == {"cron_expressions": ["30 3 * * *"], "timezone": "America/Chicago"}
    assert updated.next_fire_at == at(2026, 4, 10, 8, 30)  # 03:30 CDT
    assert updated.overlap_policy == "allow_all" and updated.note == "Moved to 3:30 AM CT."
    payload = ScheduleHistoryEvent.objects.get(event_type="ScheduleUpdated").payload
    assert payload["changed_fields"] == ["notes", "overlap_policy", "spec"]
    assert payload["next_fire_at"] == "2026-04-10T08:30:00.000000Z"
    ScheduleManager.update("nightly", arguments=[5])
    assert ScheduleManager.describe("nightly").action["input"] == [5]
    last = ScheduleHistoryEvent.objects.order_by("-sequence").first()
    assert last.payload["changed_fields"] == ["input"]
    with pytest.raises(InvalidCronExpressionError):
        ScheduleManager.update("nightly", cron_expression="nope")
    with pytest.raises(InvalidScheduleError):
        ScheduleManager.update("nightly", colour="blue")
    assert ScheduleManager.describe("nightly").spec["cron_expressions"] == ["30 3 * * *"]


def test_delete_is_soft_and_final(frozen):
    daily()
    deleted = ScheduleManager.delete("nightly")
    assert deleted.status == "deleted" and deleted.deleted_at == START
    assert deleted.next_fire_at is None
    for action in (ScheduleManager.pause, ScheduleManager.resume):
        with pytest.raises(ScheduleDeletedError):
            action("nightly")
    with pytest.raises(ScheduleDeletedError):
        ScheduleManager.update("nightly", notes="x")
    with pytest.raises(ScheduleDeletedError):
        ScheduleManager.backfill("nightly", at(2026, 4, 1, 0, 0), START)
    assert ScheduleManager.trigger("nightly") is None
    described = ScheduleManager.describe("nightly")
    assert described.last_skip_reason == "status_not_triggerable"
    assert described.skipped_trigger_count == 1
    travel_to(at(2026, 4, 11, 3, 0))
    assert ScheduleManager.tick() == []
    assert events("nightly") == [
        (1, "ScheduleCreated"),
        (2, "ScheduleDeleted"),
        (3, "ScheduleTriggerSkipped"),
    ]
    assert ScheduleHistoryEvent.objects.get(event_type="ScheduleDeleted").payload == {
        "reason": "deleted",
        "deleted_at": "2026-04-10T00:00:00.000000Z",
    }
    # The id is free again; the old row and its audit stream stay.
    fresh = daily()
    assert fresh.status == "active" and fresh.schedule_ulid != deleted.schedule_ulid
    assert WorkflowSchedule.objects.filter(schedule_id="nightly").count() == 2
    assert len(ScheduleManager.history(deleted)) == 3


def test_max_runs_retires_the_schedule(frozen, inline):
    daily(max_runs=3, overlap_policy="allow_all")
    assert ScheduleManager.describe("nightly").remaining_actions == 3
    for day in (10, 11, 12):
        travel_to(at(2026, 4, day, 2, 0))
        [row] = ScheduleManager.tick()
        assert row["outcome"] == "triggered"
    described = ScheduleManager.describe("nightly")
    assert described.status == "deleted" and described.remaining_actions == 0
    assert described.fires_count == 3 and described.next_fire_at is None
    deleted = ScheduleHistoryEvent.objects.get(event_type="ScheduleDeleted").payload
    assert deleted["reason"] == "max_runs_exhausted"
    travel_to(at(2026, 4, 13, 2, 0))
    assert ScheduleManager.tick() == []
    assert ScheduleManager.trigger("nightly") is None
    described = ScheduleManager.describe("nightly")
    assert described.last_skip_reason == "remaining_actions_exhausted"
    assert WorkflowInstance.objects.count() == 3
    assert [t for _, t in events("nightly")][-2:] == ["ScheduleDeleted", "ScheduleTriggerSkipped"]


def test_jitter_delays_each_fire_within_its_window(frozen):
    daily(jitter_seconds=300)
    first = ScheduleManager.describe("nightly").next_fire_at
    assert at(2026, 4, 10, 2, 0) <= first <= at(2026, 4, 10, 2, 5)
    travel_to(first)
    [row] = ScheduleManager.tick()
    assert row["occurrence_time"] == first  # the jittered time is the occurrence
    assert at(2026, 4, 11, 2, 0) <= row["next_fire_at"] <= at(2026, 4, 11, 2, 5)


# ------------------------------------------------------------------ backfill
def test_backfill_of_a_week_ignores_buffering_and_jitter(frozen, inline):
    travel_to(at(2026, 4, 20, 12, 0))
    daily(overlap_policy="buffer_one", jitter_seconds=600)
    rows = ScheduleManager.backfill("nightly", at(2026, 4, 10, 0, 0), at(2026, 4, 17, 0, 0))
    assert [r["cron_time"] for r in rows] == [at(2026, 4, d, 2, 0) for d in range(10, 17)]
    assert [r["outcome"] for r in rows] == ["triggered"] * 7
    assert rows[0]["instance_id"] == "schedule:nightly:backfill:20260410T020000Z"
    assert rows[0]["schedule_id"] == "nightly"
    # buffer_one acts as allow_all: every run is live at once.
    assert WorkflowInstance.objects.count() == 7
    inline.run()
    assert WorkflowRun.objects.filter(status="waiting").count() == 7
    described = ScheduleManager.describe("nightly")
    assert described.fires_count == 7 and described.buffered_count == 0
    assert described.next_fire_at >= at(2026, 4, 21, 2, 0)  # live cadence untouched
    triggered = ScheduleHistoryEvent.objects.filter(event_type="ScheduleTriggered")
    assert {e.payload["effective_overlap_policy"] for e in triggered} == {"allow_all"}
    assert triggered.order_by("sequence").first().payload["occurrence_time"] == (
        "2026-04-10T02:00:00.000000Z"
    )
    again = ScheduleManager.backfill("nightly", at(2026, 4, 16, 0, 0), at(2026, 4, 17, 12, 0))
    assert [r["outcome"] for r in again] == ["already_fired", "triggered"]
    assert again[0]["instance_id"] == "schedule:nightly:backfill:20260416T020000Z"


def test_backfill_applies_skip_and_the_override(frozen, inline):
    travel_to(at(2026, 4, 20, 12, 0))
    daily()
    rows = ScheduleManager.backfill("nightly", at(2026, 4, 10, 0, 0), at(2026, 4, 12, 23, 0))
    assert [r["outcome"] for r in rows] == ["triggered", "skipped", "skipped"]
    assert rows[1]["reason"] == "overlap_policy_skip" and rows[1]["instance_id"] is None
    rows = ScheduleManager.backfill(
        "nightly",
        at(2026, 4, 13, 0, 0),
        at(2026, 4, 14, 23, 0),
        overlap_policy_override=ScheduleOverlapPolicy.ALLOW_ALL,
    )
    assert [r["outcome"] for r in rows] == ["triggered", "triggered"]


def test_backfill_stops_when_max_runs_is_used_up(frozen):
    travel_to(at(2026, 4, 20, 12, 0))
    daily(max_runs=2, overlap_policy="allow_all")
    rows = ScheduleManager.backfill("nightly", at(2026, 4, 10, 0, 0), at(2026, 4, 17, 0, 0))
    assert len(rows) == 2
    assert ScheduleManager.describe("nightly").status == "deleted"
    assert WorkflowInstance.objects.count() == 2


def test_a_fire_whose_instance_id_is_taken_is_skipped(frozen):
    daily(overlap_policy="allow_all")
    travel_to(at(2026, 4, 10, 2, 0))
    [first] = ScheduleManager.tick()
    ScheduleManager.delete("nightly")
    travel_to(at(2026, 4, 10, 1, 0))
    daily(overlap_policy="allow_all")  # a new schedule under the same id
    travel_to(at(2026, 4, 10, 2, 0))
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "skipped" and row["reason"] == "instance_already_started"
    assert WorkflowInstance.objects.get().instance_id == first["instance_id"]
    described = ScheduleManager.describe("nightly")
    assert described.fires_count == 0 and described.next_fire_at == at(2026, 4, 11, 2, 0)


def test_a_scheduled_run_records_its_trigger_in_history(inline):
    from durable_workflow.models import HistoryEvent
    from durable_workflow.schedules import ScheduleManager

    ScheduleManager.create(
        schedule_id="lineage",
        workflow="tests.sequential",
        cron_expression="* * * * *",
        arguments=["ada"],
    )
    ScheduleManager.trigger("lineage")
    event = HistoryEvent.objects.get(event_type="ScheduleTriggered")
    assert event.payload["schedule_id"] == "lineage"
    assert event.sequence == 3  # right after StartAccepted and WorkflowStarted
    inline.run()
    assert HistoryEvent.objects.filter(event_type="WorkflowCompleted").exists()
