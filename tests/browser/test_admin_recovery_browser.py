"""A real browser recovers runs: reset and fork a failed run from its page (dry run
first), archive a finished one, and run a bulk job over a filtered list (dry run,
then the job, its progress page refreshing until done). The screenshots are the
ones the operator's guide shows (``make docs-screenshots``)."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connections

from durable_workflow import WorkflowStub
from durable_workflow.models import BulkJob, WorkflowCommand, WorkflowRun
from durable_workflow.operations import bulk
from tests.browser.test_admin_browser import chromium_page, screenshot, served  # noqa: F401
from tests.browser.test_admin_console_browser import _login
from tests.integration.helpers import start
from tests.testapp import rewind

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fixed():
    rewind.FIX.update(charge=True, body=True)
    yield rewind.FIX
    rewind.FIX.update(charge=True, body=True)


def _operator() -> None:
    User.objects.create_superuser("oncall", "oncall@example.com", "s3cret-pass")


def test_reset_and_fork_a_failed_run(served, inline, fixed):  # noqa: F811
    _operator()
    fixed["charge"] = False
    stub = start("tests.rewind", "order-3001", 1)
    inline.run()
    assert stub.refresh().status() == "failed"
    old_id = stub.run_id()
    fixed["charge"] = True  # the fix is deployed
    run_page = f"/admin/durable_workflow/workflowrun/{old_id}/change/"

    # No ORM calls inside this block: Playwright keeps an event loop on this thread.
    with chromium_page() as page:
        _login(page, served.url, run_page)
        page.click("a.dw-op-reset")
        page.wait_for_selector("#dw-operate-form")
        page.select_option("select[name=to]", "first_failure")
        page.fill("textarea[name=reason]", "card gateway fixed, INC-42")
        page.click("#dw-dry-run")
        page.wait_for_selector("#dw-preview")
        screenshot(page, "reset-dry-run")
        preview = page.inner_text("#dw-preview")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        reset_message = page.inner_text(".messagelist")
        screenshot(page, "reset-done")
        old_lineage = page.inner_text("#content")

        page.click("a.dw-op-fork")
        page.wait_for_selector("#dw-operate-form")
        page.select_option("select[name=to]", "start")
        page.fill("input[name=new_instance_id]", "order-3001-copy")
        page.fill("textarea[name=reason]", "replay it on a copy")
        screenshot(page, "fork-form")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        fork_message = page.inner_text(".messagelist")

        page.click("a.dw-op-reset")  # again, from the old run: refused, with the reason
        page.wait_for_selector("#dw-operate-form")
        page.fill("textarea[name=reason]", "once more")
        page.click("#dw-dry-run")
        page.wait_for_selector("#dw-preview")
        refusal = page.inner_text("#dw-preview")

    assert "would_reset" in preview and "re-issues steps [2]" in preview
    assert "Reset (rewind): 1 reset." in reset_message
    assert "Reset to (first_failure, cut before event 8)" in old_lineage
    assert "Fork: 1 forked." in fork_message and "order-3001-copy" in fork_message
    assert "not_current_run" in refusal and "a later run of the instance exists" in refusal
    inline.run()
    assert stub.refresh().output() == {"first": 2, "second": 20, "notes": []}
    assert stub.run_id() != old_id
    assert WorkflowStub.load("order-3001-copy").output()["second"] == 20
    reset = WorkflowCommand.objects.get(command_type="reset")
    assert (reset.source, reset.reason) == ("admin", "card gateway fixed, INC-42")
    assert WorkflowCommand.objects.get(command_type="fork").source == "admin"


def test_archive_a_finished_run(served, inline):  # noqa: F811
    _operator()
    stub = start("tests.sequential", "welcome-ada", "ada")
    inline.run()
    run_page = f"/admin/durable_workflow/workflowrun/{stub.run_id()}/change/"

    with chromium_page() as page:
        _login(page, served.url, run_page)
        page.click("a.dw-op-archive")
        page.wait_for_selector("#dw-operate-form")
        page.fill("textarea[name=reason]", "kept for the audit, out of the list")
        screenshot(page, "archive-confirmation")
        page.click("#dw-confirm")
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")
        buttons = page.locator("a.dw-op-archive").count()
        page.goto(f"{served.url}/admin/durable_workflow/workflowrun/")
        page.wait_for_selector("#changelist")
        default_list = page.inner_text("#changelist")
        page.goto(f"{served.url}/admin/durable_workflow/workflowrun/?archived=yes")
        page.wait_for_selector("#result_list")
        archived_list = page.inner_text("#result_list")

    assert "Archive: 1 archived." in message and buttons == 0
    assert "welcome-ada" not in default_list and "welcome-ada" in archived_list
    assert WorkflowRun.objects.get(id=stub.run_id()).archived_at is not None


RUNS = 6
CHANGELIST = "/admin/durable_workflow/workflowrun/"


def test_a_bulk_job_over_a_filter_from_dry_run_to_done(
    served,  # noqa: F811
    inline,
    settings,
    monkeypatch,
):
    _operator()
    settings.DURABLE_WORKFLOW = {
        **django_settings.DURABLE_WORKFLOW,
        "BULK_INLINE_MAX_RUNS": 3,
        "BULK_BATCH_SIZE": 2,
    }
    for n in range(RUNS):
        start("tests.approval", f"order-40{n:02d}", "signal")
    start("tests.sequential", "welcome-bob", "bob")  # another type: not selected
    inline.run()

    # The Celery worker: a thread that processes the job and holds after its first
    # batch until the test has seen the progress page part way.
    first_batch_seen = threading.Event()
    workers: list[threading.Thread] = []

    def hold(job: BulkJob) -> None:
        if job.batches == 1:
            first_batch_seen.wait(60)

    def work(job_id: str) -> None:
        try:
            bulk.run_bulk_job(job_id)
        finally:
            connections.close_all()

    def send(job_id: str) -> None:  # the broker edge
        worker = threading.Thread(target=work, args=(job_id,), daemon=True)
        workers.append(worker)
        worker.start()

    monkeypatch.setattr(bulk, "_between_batches", hold)
    monkeypatch.setattr(bulk, "send", send)

    with chromium_page() as page:
        _login(page, served.url, f"{CHANGELIST}?workflow_type=tests.approval")
        page.wait_for_selector("#result_list")
        page.check("#action-toggle")
        page.select_option("select[name=action]", "terminate_selected")
        page.click("button[name=index]")
        page.wait_for_selector("#dw-bulk-note")
        page.fill("textarea[name=reason]", "orders stuck since the 14:00 deploy")
        page.click("#dw-dry-run")
        page.wait_for_selector("#dw-preview")
        screenshot(page, "bulk-job-dry-run")
        summary = page.inner_text("#dw-preview-summary")
        page.click("#dw-confirm")
        # The progress page refreshes itself every few seconds.
        page.locator("#dw-bulk-progress", has_text="2/6").wait_for(timeout=30_000)
        screenshot(page, "bulk-job-progress")
        part_way = page.inner_text("#dw-bulk-summary")
        first_batch_seen.set()
        page.locator("#dw-bulk-status", has_text="done").wait_for(timeout=30_000)
        screenshot(page, "bulk-job-done")
        done = page.inner_text("#dw-bulk-summary")
        items = page.inner_text("#dw-bulk-items")

    first_batch_seen.set()
    for worker in workers:
        worker.join(timeout=30)
    assert summary == "6 would_terminate"
    assert "running" in part_way and "2/6 (33%)" in part_way
    assert "6/6 (100%): 6 done, 0 skipped, 0 failed, in 3 batches of 2." in done
    assert items.count("terminated") == RUNS and "welcome-bob" not in items
    job = BulkJob.objects.get()
    assert (job.filter, job.operator) == ("workflow_type=tests.approval", "oncall")
    commands = WorkflowCommand.objects.filter(command_type="terminate", source="admin")
    assert sorted(commands.values_list("instance_id", flat=True)) == [
        f"order-40{n:02d}" for n in range(RUNS)
    ]
    assert WorkflowRun.objects.get(instance_id="welcome-bob").status == "completed"
