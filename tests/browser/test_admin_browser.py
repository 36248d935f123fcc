"""A real browser (headless Chromium via Playwright) reads a run's timeline and cancels it."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest
from django.contrib.auth.models import User

from durable_workflow.models import WorkflowCommand, WorkflowRun
from tests.integration.helpers import start

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("DW_CHROMIUM", "/usr/bin/chromium")
#: Where the test saves the admin screenshots the documentation shows (`make
#: docs-screenshots` sets it to docs/images/admin); unset, none are saved.
SCREENSHOTS = os.environ.get("DW_SCREENSHOT_DIR")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require_browser():
    """Fail under CI, skip elsewhere, when Playwright or Chromium is missing."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install playwright)")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@contextlib.contextmanager
def chromium_page():
    """A headless Chromium page; Playwright's event loop lives only inside this block."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


@pytest.fixture
def served(settings, request):
    """The live server, with the admin's own static files (the test settings define none)."""
    import django.contrib.admin

    settings.STATIC_URL = "/static/"
    settings.STATIC_ROOT = os.path.join(os.path.dirname(django.contrib.admin.__file__), "static")
    return request.getfixturevalue("live_server")


def screenshot(page, name: str) -> None:
    if SCREENSHOTS:
        os.makedirs(SCREENSHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SCREENSHOTS, f"{name}.png"), full_page=False)


def test_open_a_timeline_and_cancel_the_run(served, inline):
    User.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    stub = start("tests.approval", "browser-run", "signal")
    inline.run()
    run_id = stub.run_id()
    timeline_path = f"/admin/durable_workflow/workflowrun/{run_id}/timeline/"

    # No ORM calls inside this block: Playwright keeps an event loop on this thread.
    with chromium_page() as page:
        page.goto(f"{served.url}/admin/login/?next={timeline_path}")
        page.fill("#id_username", "operator")
        page.fill("#id_password", "s3cret-pass")
        page.click("input[type=submit]")
        page.set_viewport_size({"width": 1280, "height": 800})
        page.wait_for_selector("#dw-timeline")
        screenshot(page, "run-timeline")
        timeline = page.inner_text("#dw-timeline")
        start_arguments = page.inner_text("#event-2")
        status_before = page.inner_text("#dw-run-status")

        page.click("a.dw-op-cancel")
        page.wait_for_selector("#dw-operate-form")
        page.fill("textarea[name=reason]", "cancelled from the browser test")
        screenshot(page, "cancel-confirmation")
        page.click("#dw-confirm")
        page.wait_for_selector("#dw-timeline")
        message = page.inner_text(".messagelist")
        status_after = page.inner_text("#dw-run-status")
        timeline_after = page.inner_text("#dw-timeline")
        page.goto(f"{served.url}/admin/durable_workflow/workflowrun/")
        page.wait_for_selector("#result_list")
        screenshot(page, "run-list")

    for event_type in ("StartAccepted", "WorkflowStarted", "SignalWaitOpened"):
        assert event_type in timeline
    assert '"signal"' in start_arguments  # the start arguments, decoded from Avro
    assert status_before.startswith("waiting")
    assert "Cancel: 1 cancelled." in message
    assert "cancel requested" in status_after
    assert "CancelRequested" in timeline_after
    command = WorkflowCommand.objects.get(command_type="cancel")
    assert (command.source, command.reason) == ("admin", "cancelled from the browser test")
    inline.run()
    assert WorkflowRun.objects.get(id=run_id).status == "cancelled"
