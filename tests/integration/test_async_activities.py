"""Async activities (issue 26, item 5), in this process.

The testing kit runs an ``async def handle()`` to its end in the calling thread.
A worker process (``in_worker()``, as Celery's signals say) hands it to its event
loop instead and returns: many attempts then run at once in one process, and are
settled from the loop's database threads.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.conf import settings
from django.test import override_settings

from durable_workflow.executor import async_attempts
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityAttempt,
    ActivityExecution,
    WorkflowRun,
)
from durable_workflow.store import runs
from tests.integration.helpers import event_types, events_of, start
from tests.testapp import async_activities
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def _until(predicate, *, timeout: float = 60, inline=None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        if inline is not None:
            inline.run()
        time.sleep(0.05)


@pytest.fixture
def worker_loop():
    """This process behaves as a Celery worker process: async attempts go to its loop."""
    quick = {**settings.DURABLE_WORKFLOW, "ASYNC_ACTIVITY_CHECK_SECONDS": 0.1}
    with override_settings(DURABLE_WORKFLOW=quick):
        async_attempts.in_worker()
        try:
            yield
        finally:
            async_attempts.shutdown(timeout=5)
            async_attempts._state.worker = False
            async_attempts._state.slots = None


def _closed(stub) -> bool:
    return WorkflowRun.objects.get(id=stub.run_id()).status in TERMINAL_RUN_STATUSES


def test_the_testing_kit_runs_async_activities_to_their_end(inline):
    stub = start("tests.async.fan-out", "async-inline", 5, 0)
    inline.run()
    assert stub.refresh().output() == 5
    assert Invocation.objects.filter(name="async-nap").count() == 5


def test_aheartbeat_records_heartbeats_in_the_testing_kit(inline):
    stub = start("tests.async.one", "async-beats-inline", "tests.async.beats", 3)
    inline.run()
    assert stub.refresh().output() == 3
    beats = events_of(stub, "ActivityHeartbeatRecorded")
    assert [beat["progress"]["current"] for beat in beats] == [1, 2, 3]


def test_a_worker_process_runs_many_async_attempts_at_once(inline, worker_loop):
    # Each nap waits until 20 naps ran at once in this process (at most 120 s), so the
    # test does not depend on how fast they are claimed; one by one, it would time out.
    async_activities.LIVE["peak"] = 0
    stub = start("tests.async.fan-out", "async-loop", 40, 120, 20)
    _until(lambda: _closed(stub), inline=inline)
    assert stub.refresh().output() == 40
    # Each nap recorded how many naps of this process ran when it began.
    peak = max(Invocation.objects.filter(name="async-nap").values_list("attempt", flat=True))
    assert peak >= 20
    attempts = ActivityAttempt.objects.filter(execution__run_id=stub.run_id())
    assert {a.status for a in attempts} == {"completed"}
    assert async_attempts.in_flight() == 0


def test_heartbeats_from_the_loop_are_recorded(inline, worker_loop):
    stub = start("tests.async.one", "async-beats-loop", "tests.async.beats", 3)
    _until(lambda: _closed(stub), inline=inline)
    assert stub.refresh().output() == 3
    assert len(events_of(stub, "ActivityHeartbeatRecorded")) == 3


@pytest.mark.parametrize("beat", [True, False], ids=["heartbeat-detected", "pushed"])
def test_cancelling_the_run_cancels_the_coroutine(inline, worker_loop, beat):
    # Each way on its own: with heartbeats, the process's check does not come round
    # during the test, so the heartbeat alone finds the cancel (which of the two came
    # first used to be up to the machine's speed; both at once is the test below).
    rare = {**settings.DURABLE_WORKFLOW, "ASYNC_ACTIVITY_CHECK_SECONDS": 3600}
    with override_settings(DURABLE_WORKFLOW=rare) if beat else contextlib.nullcontext():
        activity = "tests.async.waits-for-cancel"
        stub = start("tests.async.one", f"async-cancel-{beat}", activity, beat)
        _until(lambda: Invocation.objects.filter(name="async-waiting").exists(), inline=inline)
        stub.cancel()
        _until(lambda: Invocation.objects.filter(name="async-saw-cancel").exists(), inline=inline)
        _until(lambda: async_attempts.in_flight() == 0)
        _until(lambda: _closed(stub), inline=inline)
    assert stub.refresh().status() == "cancelled"
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert [a.status for a in ActivityAttempt.objects.filter(execution=execution)] == ["cancelled"]


def test_a_coroutine_is_cancelled_once_when_the_check_and_a_heartbeat_both_find_the_cancel(
    inline, worker_loop, monkeypatch
):
    # The process's check lists the running attempts, then asks the database about their
    # runs. Here that answer is held back until a heartbeat has found the cancel and the
    # coroutine is cleaning up, as a slow query on a busy machine would be: the check's
    # answer must not cancel the coroutine a second time, cutting its clean-up short.
    gates = async_activities.CLEAN_UP
    for gate in gates.values():
        gate.clear()
    asking, held = threading.Event(), threading.Event()
    ask = runs.cancel_states

    def held_back(run_ids):
        if held.is_set():
            asking.set()
            assert gates["began"].wait(60), "the heartbeat never found the cancel"
        return ask(run_ids)

    async def check_then_let_it_end():
        try:
            await checked()
        finally:
            if asking.is_set():
                gates["may_end"].set()

    checked = async_attempts._check
    monkeypatch.setattr(runs, "cancel_states", held_back)
    monkeypatch.setattr(async_attempts, "_check", check_then_let_it_end)
    stub = start("tests.async.one", "async-cancel-twice", "tests.async.cleans-up", True)
    _until(lambda: Invocation.objects.filter(name="async-waiting").exists(), inline=inline)
    held.set()
    _until(asking.is_set)  # the check listed the attempt, still running, and asks now
    stub.cancel()
    _until(lambda: _closed(stub) and async_attempts.in_flight() == 0, inline=inline)
    assert Invocation.objects.filter(name="async-cleaned-up").exists()
    assert stub.refresh().status() == "cancelled"
    attempt = ActivityAttempt.objects.get(execution__run_id=stub.run_id())
    assert attempt.status == "cancelled"


def test_start_to_close_timeout_cancels_and_fails_the_attempt(inline, worker_loop):
    stub = start("tests.async.one", "async-timeout", "tests.async.waits-for-cancel", False, 1)
    _until(lambda: _closed(stub), inline=inline)
    assert "timed out" in stub.refresh().output()
    assert Invocation.objects.filter(name="async-saw-cancel").exists()
    assert "ActivityTimedOut" in event_types(stub)
    attempt = ActivityAttempt.objects.get(execution__run_id=stub.run_id())
    assert attempt.status == "failed"


def test_shutdown_hands_back_running_attempts(inline, worker_loop):
    stub = start("tests.async.hand-back", "async-handback", 3, 60)
    _until(lambda: Invocation.objects.filter(name="async-nap-once").count() == 3, inline=inline)
    assert async_attempts.shutdown(timeout=5) == 3
    async_attempts._state.worker = False  # another "worker": the testing kit
    inline.run()
    assert stub.refresh().output() == ["ran 2"] * 3
    statuses = sorted(
        ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).values_list(
            "status", flat=True
        )
    )
    assert statuses == ["cancelled"] * 3 + ["completed"] * 3
