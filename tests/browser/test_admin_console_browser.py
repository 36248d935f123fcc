"""A real browser reads the operator console: the dashboard leads to the runs needing
attention, the list says why in words at 1,280 px, the run page shows the failure with
the user's frame, and the retry action recovers the run after a fix. The screenshots
are the ones the operator's guide shows (``make docs-screenshots``)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.browser.test_admin_browser import chromium_page, screenshot, served  # noqa: F401
from tests.integration.helpers import start
from tests.testapp import hostile

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


def _login(page, base: str, next_path: str) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 800})
    page.goto(f"{base}/admin/login/?next={next_path}")
    page.fill("#id_username", "oncall")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")


def _fits(page) -> bool:
    """Nothing scrolls sideways: neither the page nor the runs table inside its box."""
    return bool(
        page.evaluate(
            "document.documentElement.scrollWidth <= window.innerWidth && "
            "[...document.querySelectorAll('.results')].every("
            "e => e.scrollWidth <= e.clientWidth)"
        )
    )


def test_from_the_dashboard_to_a_parked_run_and_its_recovery(served, inline, monkeypatch):  # noqa: F811
    User.objects.create_superuser("oncall", "oncall@example.com", "s3cret-pass")
    monkeypatch.setitem(hostile.BUGGY, "code", "broken")
    start("tests.buggy", "order-1042", "name")  # parks on a NameError after its activity
    start("tests.approval", "order-1043", "signal")
    start("tests.sleeper", "nightly-report", 3600)
    start("tests.sequential", "welcome-ada", "ada")
    inline.run()
    start("tests.sequential", "welcome-bob", "bob")  # queued: no worker is registered
    parked = WorkflowRun.objects.get(instance_id="order-1042")

    # No ORM calls inside this block: Playwright keeps an event loop on this thread.
    with chromium_page() as page:
        _login(page, served.url, "/admin/durable_workflow/workflowrun/dashboard/")
        page.wait_for_selector("#dw-attention")
        screenshot(page, "dashboard")
        parked_count = page.inner_text("#dw-attention-parked .dw-count")
        dashboard_fits = _fits(page)
        page.click("#dw-attention-parked .dw-count a")
        page.wait_for_selector("#result_list")
        screenshot(page, "runs-needing-attention")
        filtered = page.inner_text("#result_list")
        page.goto(f"{served.url}/admin/durable_workflow/workflowrun/")
        page.wait_for_selector("#result_list")
        screenshot(page, "runs-triage")
        listed = page.inner_text("#result_list")
        list_fits = _fits(page)
        page.click("#result_list a:text('order-1042')")
        page.wait_for_selector("#dw-failure")
        screenshot(page, "run-failure")
        failure = page.inner_text("#dw-failure")
        user_frames = page.locator("#dw-failure .dw-user-frame").all_inner_texts()
        folded = page.locator("#dw-failure details.dw-library-frames").count()
        strip = page.locator("#dw-strip rect.dw-span").count()

        hostile.BUGGY["code"] = "fixed"  # the fix is deployed
        page.click("a.dw-op-retry")
        page.wait_for_selector("#dw-operate-form")
        page.fill("textarea[name=reason]", "NameError fixed in 1.4.2")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")

    assert parked_count.strip() == "1"
    assert dashboard_fits and list_fits
    assert "order-1042" in filtered and "order-1043" not in filtered
    assert "failed task: NameError" in listed
    assert 'signal "approved-by"' in listed
    assert "timer until" in listed
    assert "queue not consumed" in listed
    assert "NameError" in failure and "undefined_name" in failure
    assert any("hostile.py" in frame for frame in user_frames) and folded >= 1
    assert strip >= 1  # the Add activity before the bug
    assert "Retry failed workflow task: 1 repair_dispatched." in message
    command = WorkflowCommand.objects.get(command_type="repair", source="admin")
    assert command.reason == "NameError fixed in 1.4.2"
    inline.run()
    parked.refresh_from_db()
    assert parked.status == "completed"


def test_query_a_run_and_dry_run_a_bulk_retry(served, inline, monkeypatch):  # noqa: F811
    User.objects.create_superuser("oncall", "oncall@example.com", "s3cret-pass")
    monkeypatch.setitem(hostile.BUGGY, "code", "broken")
    start("tests.buggy", "order-2001", "name")
    start("tests.buggy", "order-2002", "name")
    waiting = start("tests.approval", "order-2003", "signal")
    inline.run()
    timeline = f"/admin/durable_workflow/workflowrun/{waiting.run_id()}/timeline/"

    with chromium_page() as page:
        _login(page, served.url, timeline)
        page.click("a.dw-op-query")
        page.wait_for_selector("#dw-operate-form")
        page.select_option("select[name=query_name]", "snapshot")
        page.fill("textarea[name=reason]", "what is it waiting for?")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        answer = page.inner_text(".messagelist")

        page.goto(f"{served.url}/admin/durable_workflow/workflowrun/?attention=any")
        page.wait_for_selector("#result_list")
        page.check("#action-toggle")  # every run listed
        page.select_option("select[name=action]", "retry_selected")
        page.click("button[name=index]")
        page.wait_for_selector("#dw-operate-form")
        page.fill("textarea[name=reason]", "checking before the fix")
        page.click("#dw-dry-run")
        page.wait_for_selector("#dw-preview")
        screenshot(page, "bulk-dry-run")
        summary = page.inner_text("#dw-preview-summary")

    assert "Query: 1 answered." in answer and '"stage"' in answer
    assert summary == "2 would_retry"
    assert not WorkflowCommand.objects.filter(command_type="repair").exists()
