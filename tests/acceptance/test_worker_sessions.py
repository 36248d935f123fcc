"""Worker sessions with real Celery workers: affinity, and losing the holder."""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import HistoryEvent, Task, WorkerRegistration, WorkerSession
from tests.acceptance.conftest import wait_for
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def session_workers(start_worker, monkeypatch):
    monkeypatch.setenv("DW_MAX_CONCURRENT_WORKER_SESSIONS", "2")
    monkeypatch.setenv("DW_WORKER_HEARTBEAT_SECONDS", "0.5")
    monkeypatch.setenv("DW_WORKER_STALE_AFTER_SECONDS", "3")

    def start(capabilities: str, **options):
        monkeypatch.setenv("DW_WORKER_CAPABILITIES", capabilities)
        return start_worker(**options)

    return start


def _registrations(count: int) -> dict[int, str]:
    wait_for(
        lambda: WorkerRegistration.objects.filter(status="active").count() == count,
        timeout=20,
        message="workers did not register",
    )
    return dict(WorkerRegistration.objects.values_list("pid", "worker_id"))


def test_in_session_steps_all_run_on_the_holder(session_workers):
    workers = [session_workers("gpu:l4"), session_workers("gpu:l4"), session_workers("")]
    ids = _registrations(3)
    incapable = ids[workers[2].process.pid]
    stubs = []
    for index in range(3):
        stub = WorkflowStub.make("tests.session-steps", f"affinity-{index}")
        stub.start(5, {"requirements": ["gpu:l4"]}, f"render-{index}")
        stubs.append(stub)
    for stub in stubs:
        stub.wait(timeout=60)
        ran_on = {step["worker"] for step in stub.refresh().output()}
        assert len(ran_on) == 1 and incapable not in ran_on
        session = WorkerSession.objects.get(session_id=f"render-{stub.id()[-1]}")
        assert session.lease_owner in ran_on


def test_holder_killed_mid_session_is_replaced_by_a_capable_worker(session_workers):
    options = {"requirements": ["gpu:l4"], "lease_seconds": 4}
    first = session_workers("gpu:l4", lease_seconds=5)
    second = session_workers("gpu:l4", lease_seconds=5)
    by_pid = _registrations(2)
    stub = WorkflowStub.make("tests.session-holder-loss", "holder-loss")
    stub.start(60, options)
    wait_for(
        lambda: Invocation.objects.filter(name="session-sleepy").exists(),
        timeout=30,
        message="the long in-session step never started",
    )
    holder = WorkerSession.objects.get(session_id="render").lease_owner
    victim = first if by_pid[first.process.pid] == holder else second
    survivor = second if victim is first else first
    victim.kill()

    stub.wait(timeout=90)
    first_step, slow_step, third_step = stub.refresh().output()
    replacement = by_pid[survivor.process.pid]
    assert first_step["worker"] == holder
    assert slow_step == {"worker": replacement, "attempt": 2}  # redelivered: at least once
    assert third_step["worker"] == replacement
    session = WorkerSession.objects.get(session_id="render")
    assert session.lease_owner == replacement and session.status in ("active", "closed")
    started = HistoryEvent.objects.filter(run_id=stub.run_id(), event_type="ActivityStarted")
    owners = [event.payload["lease_owner"] for event in started.order_by("sequence")]
    assert owners == [holder, holder, replacement, replacement]
    assert Invocation.objects.filter(name="session-where").count() == 2  # each exactly once


def test_closed_runs_release_their_sessions_and_refusals_back_off(session_workers):
    """Twenty runs, one session each, on two workers that may hold two sessions each.

    Most first steps find both workers full and are refused. Sessions were held until
    their lease lapsed (about 16 deliveries per activity, issue 18); a run now releases
    its session as it closes, and a refused task is offered again after a growing pause.
    """
    session_workers("gpu:l4")
    session_workers("gpu:l4")
    _registrations(2)
    stubs = []
    for index in range(20):
        stub = WorkflowStub.make("tests.session-steps", f"release-{index}")
        stub.start(2, {"requirements": ["gpu:l4"], "lease_seconds": 5}, f"release-{index}")
        stubs.append(stub)
    for stub in stubs:
        stub.wait(timeout=120)

    tasks = Task.objects.filter(task_type="activity", run__instance_id__startswith="release-")
    sent = sorted(task.dispatch_count for task in tasks)  # messages, the first included
    assert len(sent) == 40
    # Counts, not times. Before: up to 20 messages for one task, 220 for the 40 (each
    # refused task offered again every second until a lease lapsed). Now the pause
    # doubles from half a second: 8 messages cover a wait of a minute.
    assert max(sent) <= 8, sent
    assert sum(sent) <= 3 * 40, sent
    sessions = WorkerSession.objects.filter(session_id__startswith="release-")
    assert {session.status for session in sessions} == {"closed"}
