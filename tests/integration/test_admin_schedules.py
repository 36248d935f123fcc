"""Admin pages for schedules, fire slots and the schedule audit stream, and their actions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from durable_workflow.models import (
    ScheduleFire,
    ScheduleHistoryEvent,
    WorkflowRun,
    WorkflowSchedule,
)
from durable_workflow.schedules import ScheduleManager
from tests.integration.helpers import distinct_reads

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = [WorkflowSchedule, ScheduleFire, ScheduleHistoryEvent]
VIEW = tuple(f"view_{m._meta.model_name}" for m in MODELS)


def url(model, view: str = "changelist", *args) -> str:
    return reverse(f"admin:durable_workflow_{model._meta.model_name}_{view}", args=args)


def login(client, username: str, *codenames: str):
    user = User.objects.create_user(username, password="x", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="durable_workflow", codename__in=codenames
        )
    )
    client.force_login(user)
    return client


@pytest.fixture
def schedule(inline):
    ScheduleManager.create(
        schedule_id="nightly-greeting",
        workflow="tests.sequential",
        cron_expression="0 2 * * *",
        arguments=["ada"],
    )
    assert ScheduleManager.trigger("nightly-greeting")
    return WorkflowSchedule.objects.get(schedule_id="nightly-greeting")


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.model_name)
def test_schedule_pages(client, schedule, model):
    login(client, "viewer", *VIEW)
    assert client.get(url(model)).status_code == 200
    assert client.get(url(model), {"q": "nightly-greeting"}).status_code == 200
    assert client.get(url(model), {"q": "nightly"}).status_code == 200
    obj = model.objects.first()
    detail = client.get(url(model, "change", obj.pk))
    assert detail.status_code == 200
    if model is WorkflowSchedule:
        html = detail.content.decode()
        assert "ScheduleTriggered" in html and "ada" in html  # audit stream, decoded arguments


def test_pause_resume_and_trigger_actions(client, schedule):
    login(client, "ops", *VIEW, "change_workflowschedule")
    changelist = url(WorkflowSchedule)
    data = {"_selected_action": [schedule.pk], "apply": "yes", "reason": "maintenance window"}
    response = client.post(changelist, {**data, "action": "schedule_pause"}, follow=True)
    assert b"Pause default/nightly-greeting: done" in response.content
    schedule.refresh_from_db()
    assert schedule.status == "paused"
    paused = ScheduleHistoryEvent.objects.get(
        schedule_ulid=schedule.pk, event_type="SchedulePaused"
    )
    assert paused.payload["command_context"] == {
        "principal": "ops",
        "source": "admin",
        "reason": "maintenance window",
    }
    client.post(changelist, {**data, "action": "schedule_resume"})
    schedule.refresh_from_db()
    assert schedule.status == "active"
    response = client.post(changelist, {**data, "action": "schedule_trigger"}, follow=True)
    assert b"started" in response.content or b"skipped" in response.content
    confirm = client.post(
        changelist, {"action": "schedule_pause", "_selected_action": [schedule.pk]}
    )
    assert b'name="reason"' in confirm.content


def test_schedule_actions_need_permissions(client, schedule):
    login(client, "viewer", *VIEW)
    page = client.get(url(WorkflowSchedule)).content.decode()
    assert "schedule_pause" not in page
    client.post(
        url(WorkflowSchedule),
        {
            "action": "schedule_pause",
            "_selected_action": [schedule.pk],
            "apply": "yes",
            "reason": "nope",
        },
    )
    schedule.refresh_from_db()
    assert schedule.status == "active"
    login(client, "ops", *VIEW, "change_workflowschedule")
    page = client.get(url(WorkflowSchedule)).content.decode()
    assert "schedule_pause" in page and "schedule_delete" not in page


def test_backfill_a_past_window_from_the_admin(client, inline):
    import datetime as dt

    from durable_workflow import clock

    clock.freeze(dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC))
    ScheduleManager.create(
        schedule_id="nightly-report",
        workflow="tests.sequential",
        cron_expression="0 2 * * *",
        arguments=["ada"],
    )
    schedule = WorkflowSchedule.objects.get(schedule_id="nightly-report")
    login(client, "ops", *VIEW, "change_workflowschedule")
    data = {
        "action": "schedule_backfill",
        "_selected_action": [schedule.pk],
        "apply": "yes",
        "reason": "the ticker was down",
        "start": "2026-11-30 00:00:00",
        "end": "2026-12-02 00:00:00",
    }
    confirm = client.post(
        url(WorkflowSchedule), {"action": "schedule_backfill", "_selected_action": [schedule.pk]}
    )
    assert b'name="start"' in confirm.content and b"dw-dry-run" not in confirm.content
    page = client.post(url(WorkflowSchedule), data, follow=True).content.decode()
    assert "Backfill default/nightly-report: backfilled 2 occurrence(s)" in page
    fires = ScheduleFire.objects.filter(schedule=schedule, kind="backfill")
    assert [f.occurrence_time.day for f in fires.order_by("occurrence_time")] == [30, 1]
    again = client.post(url(WorkflowSchedule), data, follow=True).content.decode()
    assert "backfilled 2 occurrence(s)" in again and fires.count() == 2  # nothing twice
    event = ScheduleHistoryEvent.objects.filter(schedule_ulid=schedule.pk).last()
    assert event.payload.get("command_context", {}).get("source") == "admin"


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2026-12-02 00:00:00", "2026-11-30 00:00:00", b"must end after it starts"),
        ("yesterday", "2026-11-30 00:00:00", b"errorlist"),
        ("1900-01-01 00:00:00", "2026-11-30 00:00:00", b"refused: "),
    ],
    ids=["reversed", "garbage", "too-many-occurrences"],
)
def test_a_bad_backfill_window_is_refused_with_a_reason(client, schedule, start, end, expected):
    login(client, "ops", *VIEW, "change_workflowschedule")
    data = {
        "action": "schedule_backfill",
        "_selected_action": [schedule.pk],
        "apply": "yes",
        "reason": "r",
        "start": start,
        "end": end,
    }
    response = client.post(url(WorkflowSchedule), data, follow=True)
    assert response.status_code == 200 and expected in response.content
    assert not ScheduleFire.objects.filter(kind="backfill").exists()


def test_the_namespace_filter_reads_each_namespace_once(client, inline):
    """The runs' namespace filter lists the namespaces schedules use; the schedule
    model's default ordering put schedule_id into that DISTINCT, one row per schedule."""
    for schedule_id in ("nightly-a", "nightly-b"):
        ScheduleManager.create(
            schedule_id=schedule_id, workflow="tests.sequential", cron_expression="0 2 * * *"
        )
    login(client, "viewer", "view_workflowrun")
    reads = distinct_reads(lambda: client.get(url(WorkflowRun)).status_code == 200)
    namespaces = [(sql, rows) for sql, rows in reads if "durable_workflow_schedule" in sql]
    assert [rows for _, rows in namespaces] == [1]  # the default namespace, once
    assert "ORDER BY" not in namespaces[0][0].upper()
