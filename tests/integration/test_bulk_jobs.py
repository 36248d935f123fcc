"""Bulk jobs: a large selection acted on in batches outside the request, resumable
after a crash, cancellable between batches, with a progress page."""

from __future__ import annotations

import html as htmllib
import re
from collections import Counter

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from durable_workflow.models import (
    BulkItemState,
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
    WorkflowCommand,
    WorkflowRun,
)
from durable_workflow.operations import bulk
from tests.integration.helpers import start
from tests.integration.test_admin_actions import OPERATE, TERMINATE, VIEW, changelist, login

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 200
BATCH = 40


class Crash(Exception):
    """A worker dying between (or inside) batches."""


@pytest.fixture
def open_runs(inline):
    for n in range(RUNS):
        start("tests.approval", f"bulk-{n:03d}", "signal")
    return list(WorkflowRun.objects.filter(instance_id__startswith="bulk-").order_by("pk"))


def _job(runs, operation="terminate", size=BATCH) -> BulkJob:
    return bulk.create_job(
        operation,
        ((r.instance_id, r.id) for r in runs),
        reason="stuck since the 14:00 deploy",
        operator="oncall",
        filter="type=tests.approval",
        size=size,
    )


def _commands(operation="terminate") -> Counter[str]:
    rows = WorkflowCommand.objects.filter(command_type=operation, source="admin")
    return Counter(rows.values_list("instance_id", flat=True))


def test_a_job_runs_in_batches_each_its_own_transaction(open_runs):
    job = _job(open_runs)
    seen: list[tuple[int, int]] = []
    job = bulk.process(job.pk, progress=lambda j: seen.append((j.batches, j.processed)))
    assert job.status == BulkJobStatus.DONE
    assert (job.total, job.done, job.skipped, job.failed) == (RUNS, RUNS, 0, 0)
    assert job.batches == 5  # 200 / 40
    assert seen[:5] == [(1, 40), (2, 80), (3, 120), (4, 160), (5, 200)]
    batches = Counter(BulkJobItem.objects.filter(job=job).values_list("batch", flat=True))
    assert batches == {1: 40, 2: 40, 3: 40, 4: 40, 5: 40}
    commands = _commands()
    assert len(commands) == RUNS and set(commands.values()) == {1}  # one record per run
    assert set(WorkflowRun.objects.values_list("status", flat=True)) == {"terminated"}
    assert job.started_at and job.finished_at


def test_a_crash_between_batches_resumes_without_acting_twice(open_runs, monkeypatch):
    job = _job(open_runs)

    def crash_after_two(j):
        if j.batches == 2:
            raise Crash

    monkeypatch.setattr(bulk, "_between_batches", crash_after_two)
    with pytest.raises(Crash):
        bulk.process(job.pk)
    job.refresh_from_db()
    assert (job.status, job.batches, job.done) == (BulkJobStatus.RUNNING, 2, 2 * BATCH)
    monkeypatch.setattr(bulk, "_between_batches", lambda j: None)
    job = bulk.process(job.pk)  # what a redelivered message does
    assert (job.status, job.batches, job.done, job.skipped) == (BulkJobStatus.DONE, 5, RUNS, 0)
    assert set(_commands().values()) == {1} and len(_commands()) == RUNS


def test_a_crash_inside_a_batch_rolls_that_batch_back(open_runs, monkeypatch):
    job = _job(open_runs)
    acted: list[str] = []

    def crash_mid_batch(j, item):
        acted.append(item.instance_id)
        if j.batches == 3 and len(acted) == 2 * BATCH + 10:
            raise Crash

    monkeypatch.setattr(bulk, "_within_batch", crash_mid_batch)
    with pytest.raises(Crash):
        bulk.process(job.pk)
    assert sum(_commands().values()) == 2 * BATCH  # the third batch's ten were rolled back
    assert (
        BulkJobItem.objects.filter(job=job, state=BulkItemState.PENDING).count() == RUNS - 2 * BATCH
    )
    monkeypatch.setattr(bulk, "_within_batch", lambda j, item: None)
    job = bulk.process(job.pk)
    assert (job.done, job.skipped, job.failed) == (RUNS, 0, 0)
    assert set(_commands().values()) == {1} and len(_commands()) == RUNS


def test_the_celery_task_marks_a_failed_job_and_cancel_stops_between_batches(
    open_runs, monkeypatch
):
    job = _job(open_runs, operation="cancel")

    def cancel_after_one(j):
        if j.batches == 1:
            assert bulk.cancel(j.pk)

    monkeypatch.setattr(bulk, "_between_batches", cancel_after_one)
    job = bulk.process(job.pk)
    assert (job.status, job.batches, job.done) == (BulkJobStatus.CANCELLED, 1, BATCH)
    assert sum(_commands("cancel").values()) == BATCH
    assert not bulk.cancel(job.pk)  # already ended
    assert bulk.process(job.pk).batches == 1  # a late redelivery does nothing

    broken = _job(open_runs[:3], operation="repair")
    monkeypatch.setattr(bulk, "_between_batches", lambda j: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        bulk.run_bulk_job(str(broken.pk))
    broken.refresh_from_db()
    assert broken.status == BulkJobStatus.FAILED and "Crash" in broken.error


def _page(response) -> str:
    return htmllib.unescape(response.content.decode())


@override_settings(
    DURABLE_WORKFLOW={
        **settings.DURABLE_WORKFLOW,
        "BULK_INLINE_MAX_RUNS": 100,
        "BULK_BATCH_SIZE": BATCH,
    }
)
def test_the_runs_list_starts_a_job_and_shows_its_progress(
    client, open_runs, monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[str] = []
    monkeypatch.setattr(bulk, "send", sent.append)  # the broker edge
    login(client, "op", *TERMINATE)
    ids = [r.pk for r in open_runs]
    data = {"action": "terminate_selected", "_selected_action": ids}
    confirm = _page(client.post(changelist() + "?q=bulk-", data))
    assert 'id="dw-bulk-note"' in confirm and "batches of 40" in confirm
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            changelist() + "?q=bulk-", {**data, "apply": "yes", "reason": "after the deploy"}
        )
    job = BulkJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:durable_workflow_bulkjob_change", args=[job.pk])
    assert sent == [str(job.pk)]  # enqueued once the job was committed
    assert (job.total, job.status, job.filter, job.operator) == (RUNS, "queued", "q=bulk-", "op")
    assert not _commands()  # nothing done inside the request

    page = _page(client.get(response["Location"]))
    assert "0/200 (0%)" in page and 'http-equiv="refresh"' in page
    assert 'id="dw-bulk-cancel"' in page
    bulk.run_bulk_job(sent[0])
    page = _page(client.get(response["Location"]))
    assert "200/200 (100%): 200 done, 0 skipped, 0 failed, in 5 batches of 40." in page
    assert 'http-equiv="refresh"' not in page and 'id="dw-bulk-cancel"' not in page
    assert 'style="width: 100%"' in page
    run = open_runs[-1]  # the list selects newest first: on the first page
    assert reverse("admin:durable_workflow_workflowrun_change", args=[run.pk]) in page
    assert re.search(r'class="dw-state-done">done</td><td>terminated', page)


@override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "BULK_INLINE_MAX_RUNS": 300})
def test_a_selection_under_the_threshold_stays_inline(client, open_runs):
    login(client, "op", *TERMINATE)
    data = {
        "action": "terminate_selected",
        "_selected_action": [r.pk for r in open_runs[:5]],
        "apply": "yes",
        "reason": "r",
    }
    assert client.post(changelist(), data).status_code == 302
    assert not BulkJob.objects.exists() and sum(_commands().values()) == 5


def test_progress_and_cancel_are_permission_checked(client, open_runs):
    job = _job(open_runs[:3])  # a terminate: cancelling it takes the terminate permission
    url = reverse("admin:durable_workflow_bulkjob_change", args=[job.pk])
    cancel = reverse("admin:durable_workflow_bulkjob_cancel", args=[job.pk])
    login(client, "viewer", *VIEW)
    assert client.get(url).status_code == 403
    client.logout()
    login(client, "op", *OPERATE)
    page = _page(client.get(url))
    assert "0/3 (0%)" in page and 'id="dw-bulk-cancel"' not in page
    assert client.post(cancel).status_code == 403
    assert BulkJob.objects.get().status == "queued"
    client.logout()
    login(client, "boss", *TERMINATE)
    assert client.get(cancel).status_code == 403  # POST only
    assert client.post(cancel).status_code == 302
    assert BulkJob.objects.get().status == "cancelled"
    assert bulk.process(job.pk).done == 0


def test_the_command_runs_a_job_with_progress_and_a_dry_run(inline):
    import io

    from django.core.management import call_command

    for n in range(25):
        start("tests.approval", f"cli-{n:02d}", "signal")
    out = io.StringIO()
    call_command(
        "workflow_bulk",
        "cancel",
        "--instance-prefix",
        "cli-",
        "--reason",
        "r",
        "--dry-run",
        stdout=out,
    )
    assert "dry run (instance-prefix=cli-): 25 would_cancel; nothing was changed" in out.getvalue()
    assert not BulkJob.objects.exists()
    out = io.StringIO()
    call_command(
        "workflow_bulk",
        "cancel",
        "--instance-prefix",
        "cli-",
        "--reason",
        "r",
        "--batch-size",
        "10",
        "--operator",
        "ops-bot",
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert lines[1:4] == [
        "batch 1: 10/25 (10 done, 0 skipped, 0 failed) running",
        "batch 2: 20/25 (20 done, 0 skipped, 0 failed) running",
        "batch 3: 25/25 (25 done, 0 skipped, 0 failed) running",
    ]
    assert lines[-1].endswith(": done")
    assert sum(_commands("cancel").values()) == 25
    job = BulkJob.objects.get()
    out = io.StringIO()
    call_command("workflow_bulk", "--resume", str(job.pk), stdout=out)
    assert sum(_commands("cancel").values()) == 25  # nothing left to do
