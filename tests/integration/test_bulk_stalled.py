"""A bulk job whose worker was killed mid-batch (SIGKILL, a real process) is stalled:
the doctor reports it once its progress has stood still for
``BULK_STALLED_AFTER_SECONDS``, the repair pass sends its message again (once), and
the job then finishes without acting twice on any run."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.urls import reverse

from durable_workflow import clock, executor
from durable_workflow.models import BulkItemState, BulkJob, BulkJobItem, WorkflowCommand
from durable_workflow.operations import bulk
from durable_workflow.operations.doctor import DoctorContext, run_checks
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 12
BATCH = 5

#: The worker: processes the job and kills itself (SIGKILL: no cleanup, no rollback
#: but the database's own) at the third run of its second batch.
WORKER = """
import os, signal, sys
import django
django.setup()
from durable_workflow.operations import bulk
acted = []
def die(job, item):
    acted.append(item.id)
    if job.batches == 2 and len(acted) == 8:
        os.kill(os.getpid(), signal.SIGKILL)
bulk._within_batch = die
bulk.process(sys.argv[1])
"""


def _worker_env() -> dict[str, str]:
    """This test's database, for a process of its own (as tests/acceptance does)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    name = connection.settings_dict["NAME"]
    if connection.vendor == "postgresql":
        env["DW_PG_NAME"] = name
        env["DW_PG_ENGINE_NAME"] = connections["workflows"].settings_dict["NAME"]
    else:
        env["DW_SQLITE_PATH"] = name
    return env


def _terminations() -> Counter[str]:
    rows = WorkflowCommand.objects.filter(command_type="terminate")
    return Counter(rows.values_list("instance_id", flat=True))


def _job_page(client, job: BulkJob) -> str:
    url = reverse("admin:durable_workflow_bulkjob_change", args=[job.pk])
    return client.get(url).content.decode()


def _bulk_check(now: dt.datetime):
    (result,) = run_checks(DoctorContext(now=now), only=("bulk_jobs",))
    return result


def test_a_killed_worker_leaves_a_stalled_job_that_repair_sends_again(
    inline, monkeypatch, admin_client
):
    runs = [start("tests.approval", f"stall-{n:02d}", "signal") for n in range(RUNS)]
    inline.run()
    job = bulk.create_job(
        "terminate",
        ((f"stall-{n:02d}", None) for n in range(len(runs))),
        reason="stuck since the deploy",
        operator="oncall",
        size=BATCH,
    )

    worker = subprocess.run(
        [sys.executable, "-c", WORKER, str(job.pk)],
        env=_worker_env(),
        capture_output=True,
        timeout=120,
    )
    assert worker.returncode == -signal.SIGKILL, worker.stderr.decode()[-2000:]

    # The first batch committed; the second died with its worker: rolled back.
    job.refresh_from_db()
    assert (job.status, job.batches, job.done) == ("running", 1, BATCH)
    assert sum(_terminations().values()) == BATCH
    pending = BulkJobItem.objects.filter(job=job, state=BulkItemState.PENDING)
    assert pending.count() == RUNS - BATCH

    sent: list[str] = []
    monkeypatch.setattr(bulk, "send", sent.append)  # the broker edge
    still = job.updated_at + dt.timedelta(seconds=bulk.stalled_after() - 1)
    stalled = job.updated_at + dt.timedelta(seconds=bulk.stalled_after() + 1)
    # Not yet stalled: the doctor is content, the repair pass leaves it alone.
    assert _bulk_check(still).status == "ok"
    assert executor.repair_pass(now=still).bulk_jobs_resent == 0 and not sent

    page = _job_page(admin_client, job)
    assert 'id="dw-bulk-stalled"' not in page  # progress a moment ago
    clock.freeze(stalled)
    try:
        page = _job_page(admin_client, job)
    finally:
        clock.reset()
    assert 'id="dw-bulk-stalled"' in page and f"workflow_bulk --resume {job.pk}" in page

    finding = _bulk_check(stalled)
    assert finding.status == "warning"
    assert str(job.pk) in finding.message and "(terminate, 5/12)" in finding.message
    assert "workflow_bulk --resume" in finding.next_step
    assert finding.details["jobs"][0]["id"] == str(job.pk)

    report = executor.repair_pass(now=stalled)
    assert report.bulk_jobs_resent == 1 and sent == [str(job.pk)]
    # Claimed: a second pass (beat and a --loop both running) does not send it again.
    assert executor.repair_pass(now=stalled).bulk_jobs_resent == 0 and len(sent) == 1
    assert _bulk_check(stalled).status == "ok"

    assert bulk.run_bulk_job(sent[0]) == "done"  # the worker that receives it
    job.refresh_from_db()
    assert (job.status, job.done, job.skipped, job.failed) == ("done", RUNS, 0, 0)
    terminations = _terminations()
    assert len(terminations) == RUNS and set(terminations.values()) == {1}
    later = clock.now() + dt.timedelta(days=1)
    assert _bulk_check(later).status == "ok"  # a finished job is never stalled


def test_a_lost_message_and_the_command_line_resume(inline, monkeypatch):
    """A queued job whose message never arrived is stalled too; an operator may resume
    it from a shell instead, and a late message then finds nothing to do."""
    for n in range(3):
        start("tests.approval", f"lost-{n}", "signal")
    inline.run()
    job = bulk.create_job(
        "cancel", ((f"lost-{n}", None) for n in range(3)), reason="r", operator="cli", size=2
    )
    sent: list[str] = []
    monkeypatch.setattr(bulk, "send", sent.append)
    stalled = job.updated_at + dt.timedelta(seconds=bulk.stalled_after() + 1)
    assert _bulk_check(stalled).details["jobs"][0]["status"] == "queued"

    out = StringIO()
    call_command("workflow_bulk", "--resume", str(job.pk), stdout=out)
    assert f"bulk job {job.pk}: done" in out.getvalue()
    assert bulk.run_bulk_job(str(job.pk)) == "done"  # the late message: nothing twice
    assert executor.repair_pass(now=stalled).bulk_jobs_resent == 0 and not sent
    rows = WorkflowCommand.objects.filter(command_type="cancel")
    assert sorted(rows.values_list("instance_id", flat=True)) == ["lost-0", "lost-1", "lost-2"]
    assert BulkJob.objects.get(pk=job.pk).batches == 2
