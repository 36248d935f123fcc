"""A due timer runs the workflow task it wakes in its own transaction, when it may.

Each test drives a process with a dispatch backend that only records messages, so a
workflow task not run in place shows up as a published message.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from durable_workflow import WorkflowStub, clock, executor
from durable_workflow.executor import dispatch, routing, sticky
from durable_workflow.executor.identity import set_registered_worker_id
from durable_workflow.models import Task
from durable_workflow.transport import worker as worker_transport
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import Recorder, event_types, register_worker, start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)


def eager_settings(**more: Any) -> dict[str, Any]:
    return {**settings.DURABLE_WORKFLOW, "EAGER_WORKFLOW_TASKS": True, **more}


@pytest.fixture
def recorder():
    clock.freeze()
    sticky.cache.clear()
    routing.forget()
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    with override_settings(DURABLE_WORKFLOW=eager_settings()):
        yield backend
    dispatch.set_backend(previous)
    sticky.cache.clear()
    routing.forget()
    clock.reset()


def sleeping(instance_id: str) -> WorkflowStub:
    """A run of ``tests.sleeper`` past its first workflow task, its 60 s timer due."""
    stub = start("tests.sleeper", instance_id, 60)
    (first,) = tasks_of(stub, "workflow")
    assert executor.run_workflow_task(first.id) == "completed"
    assert stub.refresh().status() == "waiting"
    clock.advance(dt.timedelta(seconds=61))
    return stub


def fire(stub: WorkflowStub, **options: bool) -> str:
    (task,) = [t for t in tasks_of(stub, "timer") if t.status == "ready"]
    return executor.run_timer_task(task.id, **options)


def commits_during(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    commits: list[int] = []
    real_commit = connection.commit
    monkeypatch.setattr(connection, "commit", lambda: commits.append(1) or real_commit())
    return commits


def test_the_woken_workflow_task_runs_in_the_timers_transaction(recorder, monkeypatch):
    stub = sleeping("timer-here")
    recorder.sent.clear()
    commits = commits_during(monkeypatch)
    assert fire(stub) == "fired"
    assert len(commits) == 1
    assert recorder.sent == []  # no workflow task's message
    assert stub.refresh().status() == "completed"
    assert event_types(stub)[-2:] == ["TimerFired", "WorkflowCompleted"]
    woken = tasks_of(stub, "workflow")[-1]
    assert woken.status == "completed" and woken.lease_expires_at is None


def test_in_place_a_timer_costs_one_transaction_and_no_message_instead_of_two(
    recorder, monkeypatch
):
    commits = commits_during(monkeypatch)
    here = sleeping("timer-count-here")
    recorder.sent.clear()
    commits.clear()
    fire(here)
    in_place = (len(commits), len(recorder.sent))
    regular = sleeping("timer-count-regular")
    recorder.sent.clear()
    commits.clear()
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_WORKFLOW_TASKS=False)):
        fire(regular)
        woken = Task.objects.get(run_id=regular.run_id(), task_type="workflow", status="ready")
        executor.run_workflow_task(woken.id)
    assert here.refresh().output() == regular.refresh().output()
    assert in_place == (1, 0)
    assert (len(commits), len(recorder.sent)) == (2, 1)


def test_switched_off_the_workflow_task_is_published(recorder):
    stub = sleeping("timer-off")
    recorder.sent.clear()
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_WORKFLOW_TASKS=False)):
        assert fire(stub) == "fired"
    assert [kind for kind, _, _ in recorder.sent] == ["workflow"]
    assert stub.refresh().status() == "pending"


def test_a_redelivered_timer_wakes_the_workflow_through_a_counted_task(recorder):
    # The earlier delivery may have died with the workflow task it ran in place: this
    # one must not run it in place again, where a crash would leave no count.
    stub = sleeping("timer-redelivered")
    recorder.sent.clear()
    assert fire(stub, redelivered=True) == "fired"
    assert [kind for kind, _, _ in recorder.sent] == ["workflow"]
    woken = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    assert woken.payload.get("count_first") is True


def test_a_run_warm_in_another_live_worker_is_woken_there(recorder):
    # Unless its history is short enough to replay here: test_timer_replay_in_place.py.
    register_worker("w1")
    register_worker("w2")

    def be(worker_id: str | None) -> None:
        direct = f"dw.direct.{worker_id}" if worker_id else None
        set_registered_worker_id(worker_id, direct_queue=direct)
        worker_transport._state.update(worker_id=worker_id, direct_queue=direct)

    saved = dict(worker_transport._state)
    try:
        be("w1")
        stub = sleeping("timer-warm-elsewhere")  # w1 ran it and keeps it warm
        register_worker("w1")  # both still beating after the 61 s
        register_worker("w2")
        routing.forget()
        be("w2")
        recorder.sent.clear()
        off = eager_settings(TIMER_REPLAY_IN_PLACE_MAX_EVENTS=0)
        with override_settings(DURABLE_WORKFLOW=off):
            assert fire(stub) == "fired"
        assert recorder.sent == [("workflow", "dw.direct.w1", None)]
    finally:
        be(None)
        worker_transport._state.clear()
        worker_transport._state.update(saved)


# ---------------------------------------------------------------- statements counted
# On PostgreSQL the engine's reads under the run lock share one round trip and its
# writes go with the next read or the commit (``store.sql``); elsewhere every statement
# is a round trip of its own.


def _ready(stub: Any, task_type: str) -> Any:
    (task,) = [t for t in tasks_of(stub, task_type) if t.status == "ready"]
    return task


def _statements(queries: CaptureQueriesContext) -> list[tuple[str, str]]:
    """Each statement sent, transaction control left out (``BEGIN`` goes with the first
    query and ``COMMIT`` with the last where writes are batched)."""
    parts = [k for q in queries.captured_queries for k in sql_text.kinds(q["sql"] or "")]
    return [k for k in parts if k[0] not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")]


def _round_trips(queries: CaptureQueriesContext) -> int:
    return sum(1 for q in queries.captured_queries if (q["sql"] or "") not in ("BEGIN", "COMMIT"))


def test_a_due_timer_fired_in_place_reads_each_row_once_in_three_round_trips(recorder):
    stub = sleeping("timer-statements-here")
    timer_task = _ready(stub, "timer")
    with CaptureQueriesContext(connection) as queries:
        assert executor.run_timer_task(timer_task.id) == "fired"
    assert stub.refresh().status() == "completed"
    statements = _statements(queries)
    # The run (locked), the timer task and its timer are each read once; the timer task
    # is written once (taken and settled together), the woken task inserted settled.
    assert statements.count(("SELECT", "durable_workflow_run")) == 1
    assert statements.count(("SELECT", "durable_workflow_timer")) == 1
    assert statements.count(("UPDATE", "durable_workflow_timer")) == 1
    assert statements.count(("INSERT", "durable_workflow_task")) == 1
    task_updates = [s for s in statements if s == ("UPDATE", "durable_workflow_task")]
    assert len(task_updates) == 2  # the timer's task, then the run's open tasks at its close
    if connection.vendor == "postgresql":
        # The reads under the lock; the writes with the close's question; the rest with
        # the commit.
        assert _round_trips(queries) == 3
    else:
        assert _round_trips(queries) <= 17  # a statement each


def test_the_workflow_task_a_timer_publishes_costs_three_round_trips(recorder):
    stub = sleeping("timer-statements-message")
    timer_task = _ready(stub, "timer")
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_WORKFLOW_TASKS=False)):
        with CaptureQueriesContext(connection) as fired:
            assert executor.run_timer_task(timer_task.id) == "fired"
        woken = _ready(stub, "workflow")
        with CaptureQueriesContext(connection) as resumed:
            assert executor.run_workflow_task(woken.id) == "completed"
    assert stub.refresh().status() == "completed"
    # It reads what the timer's transaction wrote: the run, its task and the history
    # after the run's last workflow task, in one round trip with the lock.
    statements = _statements(resumed)
    assert statements.count(("SELECT", "durable_workflow_history_event")) == 1
    assert statements.count(("SELECT", "durable_workflow_run")) == 1
    if connection.vendor == "postgresql":
        assert (_round_trips(fired), _round_trips(resumed)) == (2, 3)
