"""The run page's other actions in a real browser: send an update and a signal,
repair, terminate; and backfill a schedule from its list. (Cancel, query and retry
are driven by the other browser tests.) Each is recorded with the operator's reason."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User

from durable_workflow import clock
from durable_workflow.models import ScheduleFire, WorkflowCommand, WorkflowRun, WorkflowSchedule
from durable_workflow.schedules import ScheduleManager
from tests.browser.test_admin_browser import chromium_page, screenshot, served  # noqa: F401
from tests.browser.test_admin_console_browser import _login
from tests.integration.helpers import start

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _operate(page, kind: str, reason: str, **fields: str) -> str:
    """Open ``kind`` from the run page, fill its form, confirm; the messages shown."""
    page.click(f"a.dw-op-{kind}")
    page.wait_for_selector("#dw-operate-form")
    for name, value in fields.items():
        if page.locator(f"select[name={name}]").count():
            page.select_option(f"select[name={name}]", value)
        else:
            page.fill(f"[name={name}]", value)
    page.fill("textarea[name=reason]", reason)
    if kind == "signal":
        screenshot(page, "signal-form")
    page.click("#dw-confirm")
    page.wait_for_selector(".messagelist")
    return page.inner_text(".messagelist")


def test_update_signal_repair_and_terminate_from_the_run_page(served, inline):  # noqa: F811
    User.objects.create_superuser("oncall", "oncall@example.com", "s3cret-pass")
    approval = start("tests.approval", "order-5001", "signal")
    stuck = start("tests.approval", "order-5002", "signal")
    inline.run()
    page_of = {
        stub: f"/admin/durable_workflow/workflowrun/{stub.run_id()}/change/"
        for stub in (approval, stuck)
    }

    with chromium_page() as page:
        _login(page, served.url, page_of[approval])
        updated = _operate(
            page, "update", "ready per ticket 7", update_name="mark-ready", arguments="[true]"
        )
        signalled = _operate(
            page, "signal", "approved on the phone", signal_name="approved-by", arguments='["ada"]'
        )
        page.goto(served.url + page_of[stuck])
        repaired = _operate(page, "repair", "the broker restarted")
        terminated = _operate(page, "terminate", "customer asked to stop")
        status = page.inner_text("#dw-run-status")

    assert "Send update: 1 accepted." in updated
    assert "Send signal: 1 signal_received." in signalled
    assert "Repair: 1 repair_not_needed." in repaired  # a healthy waiting run
    assert "Terminate: 1 terminated." in terminated and status.startswith("terminated")
    reasons = dict(
        WorkflowCommand.objects.filter(source="admin").values_list("command_type", "reason")
    )
    assert reasons["terminate"] == "customer asked to stop"
    assert reasons["repair"] == "the broker restarted"
    signal = WorkflowCommand.objects.get(command_type="signal", source="admin")
    assert (signal.payload["reason"], signal.payload["operator"]) == (
        "approved on the phone",
        "oncall",
    )
    inline.run()
    assert approval.refresh().output() == "ada"
    assert approval.query("snapshot")["ready"] is True  # the update was applied
    assert WorkflowRun.objects.get(id=stuck.run_id()).status == "terminated"


def test_backfill_a_schedule_from_its_list(served, inline):  # noqa: F811
    User.objects.create_superuser("oncall", "oncall@example.com", "s3cret-pass")
    ScheduleManager.create(
        schedule_id="nightly-report",
        workflow="tests.sequential",
        cron_expression="0 2 * * *",
        arguments=["ada"],
    )
    schedule = WorkflowSchedule.objects.get(schedule_id="nightly-report")
    today = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    window = [(today - dt.timedelta(days=d)).strftime("%Y-%m-%d %H:%M:%S") for d in (3, 1)]

    with chromium_page() as page:
        _login(page, served.url, "/admin/durable_workflow/workflowschedule/")
        page.wait_for_selector("#result_list")
        page.check(f"input[name=_selected_action][value='{schedule.pk}']")
        page.select_option("select[name=action]", "schedule_backfill")
        page.click("button[name=index]")
        page.wait_for_selector("#dw-operate-form")
        page.fill("input[name=start]", window[0])
        page.fill("input[name=end]", window[1])
        page.fill("textarea[name=reason]", "the ticker was down for two nights")
        screenshot(page, "schedule-backfill")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")

    assert "Backfill default/nightly-report: backfilled 2 occurrence(s)" in message
    fires = ScheduleFire.objects.filter(schedule=schedule, kind="backfill")
    assert fires.count() == 2
