"""Short leases, kept alive by the running process (issue 30, item 4).

A crashed attempt should be retried within a minute, so leases must be short; but a
live process running a long activity that never heartbeats must keep it. Here the
lease is 2 s, the activity sleeps 8 s without a heartbeat, and another worker runs
the repair pass every second: the attempt is never handed out again.
"""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt, ActivityExecution
from tests.acceptance.conftest import wait_for
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_a_long_activity_without_heartbeats_keeps_its_short_lease(start_worker):
    start_worker(lease_seconds=2)
    start_worker(lease_seconds=2)  # idle: takes the repair pass while the other sleeps
    stub = WorkflowStub.make("tests.kill-me", "kept-lease")
    stub.start(8)
    wait_for(
        lambda: Invocation.objects.filter(name="sleepy").exists(),
        timeout=60,
        message="the slow activity never started",
    )
    stub.wait(timeout=90)
    assert stub.output() == ["hello before", "woke on attempt 1", 42]
    sleepy = ActivityExecution.objects.get(run_id=stub.run_id(), activity_type="tests.sleepy")
    attempts = ActivityAttempt.objects.filter(execution=sleepy)
    assert [a.status for a in attempts] == ["completed"]  # never reclaimed
    assert Invocation.objects.filter(name="sleepy").count() == 1
