"""Async activities in a real Celery worker process (issue 26, item 5).

The worker is one solo process (Celery concurrency 1): every async attempt it runs
at once beyond one runs on its event loop, not in a Celery slot. Concurrency is
measured, never wall-clock speed: each nap records how many naps of its process
were running when it began, and the attempt rows' [started, closed] intervals
are swept for their largest overlap.
"""

from __future__ import annotations

import json

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt
from tests.acceptance.conftest import wait_for
from tests.integration.helpers import event_types, events_of
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

LOOP = {"DW_EXTRA_SETTINGS_JSON": json.dumps({"ASYNC_ACTIVITY_CONCURRENCY": 250})}


def _largest_overlap(attempts) -> int:
    edges = sorted(
        [(a.started_at, 1) for a in attempts] + [(a.closed_at, -1) for a in attempts],
        key=lambda edge: (edge[0], edge[1]),  # an end before a start at the same instant
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.slow  # 200 naps of 20 s and their workflow tasks: `make test-all` (CI)
def test_two_hundred_sleeping_async_activities_share_one_worker_process(start_worker):
    worker = start_worker(env=LOOP)
    stub = WorkflowStub.make("tests.async.fan-out", "async-200")
    # Long enough that claiming all 200 (one Celery slot, between the workflow tasks
    # their results wake) takes less than one nap on a loaded machine.
    stub.start(200, 20)
    stub.wait(timeout=300)
    assert stub.output() == 200
    peak = max(Invocation.objects.filter(name="async-nap").values_list("attempt", flat=True))
    attempts = list(ActivityAttempt.objects.filter(execution__run_id=stub.run_id()))
    assert len(attempts) == 200 and {a.status for a in attempts} == {"completed"}
    # Celery runs one task at a time in this process; the naps overlapped by the dozen.
    assert peak >= 50, worker.output()[-3000:]
    assert _largest_overlap(attempts) >= 50


def test_heartbeats_and_cancellation_reach_the_coroutine(start_worker):
    start_worker()
    beats = WorkflowStub.make("tests.async.one", "async-beats")
    beats.start("tests.async.beats", 3)
    beats.wait(timeout=60)
    assert beats.output() == 3
    assert len(events_of(beats, "ActivityHeartbeatRecorded")) == 3

    stub = WorkflowStub.make("tests.async.one", "async-cancel")
    stub.start("tests.async.waits-for-cancel", False)  # no heartbeat: the check finds it
    wait_for(
        lambda: Invocation.objects.filter(name="async-waiting").exists(),
        timeout=60,
        message="the async activity never started",
    )
    stub.cancel()
    wait_for(
        lambda: Invocation.objects.filter(name="async-saw-cancel").exists(),
        timeout=60,
        message="the coroutine never saw CancelledError",
    )
    stub.wait(timeout=60)
    assert stub.status() == "cancelled"


def test_a_start_to_close_timeout_fails_the_attempt(start_worker):
    start_worker()
    stub = WorkflowStub.make("tests.async.one", "async-timeout")
    stub.start("tests.async.waits-for-cancel", False, 2)
    stub.wait(timeout=60)
    assert "timed out" in stub.output()
    assert "ActivityTimedOut" in event_types(stub)
    assert Invocation.objects.filter(name="async-saw-cancel").exists()
    assert ActivityAttempt.objects.get(execution__run_id=stub.run_id()).status == "failed"


def test_sigterm_hands_back_running_async_attempts_to_another_worker(start_worker):
    first = start_worker(env=LOOP)
    stub = WorkflowStub.make("tests.async.hand-back", "async-sigterm")
    stub.start(20, 600)
    wait_for(
        lambda: Invocation.objects.filter(name="async-nap-once").count() == 20,
        timeout=120,
        message="the async attempts never all started",
    )
    first.stop()  # SIGTERM: a warm shutdown
    assert "handed back 20 async activity attempts" in first.output(), first.output()[-3000:]
    start_worker(env=LOOP)
    stub.wait(timeout=120)
    assert stub.output() == ["ran 2"] * 20
    statuses = list(
        ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).values_list(
            "status", flat=True
        )
    )
    assert sorted(statuses) == ["cancelled"] * 20 + ["completed"] * 20


@pytest.mark.slow  # two worker start-ups and 30 attempts run twice: `make test-all` (CI)
def test_a_prefork_child_runs_its_own_loop_and_hands_back_on_sigterm(start_worker):
    first = start_worker(pool="prefork", env=LOOP)  # one child: Celery concurrency 1
    stub = WorkflowStub.make("tests.async.hand-back", "async-prefork")
    stub.start(30, 600)
    wait_for(
        lambda: Invocation.objects.filter(name="async-nap-once").count() == 30,
        timeout=180,
        message="the async attempts never all started in the child",
    )
    running = ActivityAttempt.objects.filter(execution__run_id=stub.run_id(), status="running")
    assert running.count() == 30  # thirty at once, in a process with one Celery slot
    assert len({attempt.lease_owner for attempt in running}) == 1
    first.stop()  # SIGTERM: the child stops, handing its attempts back
    assert "handed back 30 async activity attempts" in first.output(), first.output()[-3000:]
    start_worker(env=LOOP)
    stub.wait(timeout=120)
    assert stub.output() == ["ran 2"] * 30
