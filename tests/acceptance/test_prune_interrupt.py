"""Ctrl-C stops a real ``manage.py workflow_prune`` between batches: what committed stays
pruned, the batch under way is rolled back, and the exit status is 130.

The test holds a row lock on the second-oldest run, so the first batch commits and the
second waits on the lock; the signal is sent once the first batch's progress line came.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys

import pytest
from django.db import connection, transaction

from durable_workflow.models import HistoryEvent, WorkflowRun
from tests.acceptance.conftest import ROOT
from tests.integration.helpers import start

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _prune_process() -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DW_TEST_DB": "postgres",
        "DW_PG_NAME": connection.settings_dict["NAME"],
        "PYTHONPATH": str(ROOT),
    }
    command = ["workflow_prune", "--older-than", "30d", "--batch-size", "1", "--skip-checks"]
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "django", *command],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal, whatever this process was handed.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_sigint_stops_the_prune_between_batches(inline):
    if connection.vendor != "postgresql":
        pytest.skip("runs a manage.py process against PostgreSQL (DW_TEST_DB=postgres)")
    stubs = [start("tests.sequential", f"interrupted-{n}", "ada") for n in range(3)]
    inline.run()
    runs = [str(stub.run_id()) for stub in stubs]
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    for age, run_id in enumerate(runs):  # pruned oldest first: in this order
        WorkflowRun.objects.filter(id=run_id).update(closed_at=long_ago + dt.timedelta(hours=age))
    events = HistoryEvent.objects.filter(run_id__in=runs[1:]).count()

    with transaction.atomic():
        WorkflowRun.objects.select_for_update().get(id=runs[1])
        process = _prune_process()
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert "1/3 runs" in line, line + process.stderr.read()
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert process.returncode == 130, stderr
    assert "interrupted: 1 of 3 run(s) pruned" in stderr
    assert "Traceback" not in stderr
    left = WorkflowRun.objects.filter(id__in=runs).values_list("id", flat=True)
    assert sorted(str(run_id) for run_id in left) == sorted(runs[1:])
    assert HistoryEvent.objects.filter(run_id__in=runs[1:]).count() == events
