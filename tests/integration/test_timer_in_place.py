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

from durable_workflow import WorkflowStub, clock, executor
from durable_workflow.executor import dispatch, routing, sticky
from durable_workflow.executor.identity import set_registered_worker_id
from durable_workflow.models import Task
from durable_workflow.transport import worker as worker_transport
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
        assert fire(stub) == "fired"
        assert recorder.sent == [("workflow", "dw.direct.w1", None)]
    finally:
        be(None)
        worker_transport._state.clear()
        worker_transport._state.update(saved)
