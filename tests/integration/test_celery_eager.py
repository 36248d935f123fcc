"""``task_always_eager`` (development settings): the engine runs its tasks in the process
that commits them, through the real Celery backend, with no broker and no worker; the
system check and the doctor say so."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings

from durable_workflow import clock
from durable_workflow.executor import dispatch, repair_pass
from tests.celery_app import app
from tests.integration.helpers import event_types, start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def eager():
    """The tests' Celery app in eager mode, with a broker nobody listens on: anything
    published would fail (or vanish), so a run that finishes ran in this process."""
    previous_backend = dispatch.set_backend(None)  # the Celery backend
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url")}
    app.conf.update(task_always_eager=True, broker_url="redis://127.0.0.1:1/0")
    yield app
    app.conf.update(saved)
    dispatch.set_backend(previous_backend)


def test_a_started_workflow_runs_to_completion_in_the_calling_process(eager):
    stub = start("tests.sequential", "eager-1", "ada")
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == ["hello ada", 3]


def test_a_timer_waits_for_the_repair_pass_once_due(eager):
    clock.freeze()
    stub = start("tests.sleeper", "eager-2", 60)
    stub.refresh()
    assert stub.status() == "waiting"
    assert repair_pass().redispatched == 0  # not due: nothing runs early
    assert stub.refresh().status() == "waiting"
    clock.advance(dt.timedelta(seconds=90))
    repair_pass()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == "slept 90"  # it fires when the repair pass runs it
    assert "TimerFired" in event_types(stub)


def test_tasks_a_task_makes_run_after_it_not_inside_it(eager, monkeypatch):
    """One loop runs them in turn, so a long workflow does not deepen the stack (Celery's
    own eager mode would nest each task's apply inside the one that sent it)."""
    from durable_workflow.transport import in_process

    real, depth, deepest, ran = in_process.run_task, [0], [0], []

    def counting(task):
        depth[0] += 1
        deepest[0] = max(deepest[0], depth[0])
        ran.append(task.task_type)
        try:
            return real(task)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(in_process, "run_task", counting)
    stub = start("tests.sequential", "eager-3", "bob")
    assert stub.refresh().status() == "completed"
    assert len(ran) >= 3 and deepest[0] == 1


def _check_messages():
    from durable_workflow.checks import check_celery

    return check_celery()


def test_the_system_check_says_what_happens(eager):
    with override_settings(DEBUG=True):
        notes = _check_messages()
    assert [m.id for m in notes] == ["durable_workflow.I002"]
    assert "runs in the process that commits it" in notes[0].msg
    assert "repair pass" in notes[0].msg
    warnings = _check_messages()
    assert [m.id for m in warnings] == ["durable_workflow.W002"]


def test_the_doctor_says_what_happens_and_wants_no_broker_or_worker(eager):
    from tests.integration.test_doctor import check, doctor

    with override_settings(DEBUG=True):
        document = doctor()
    celery = check(document, "celery_app")
    assert celery["status"] == "ok"
    assert "runs in the process that commits it" in celery["message"]
    assert celery["details"]["eager"] == ["default"]
    assert check(document, "broker")["status"] == "ok"
    workers = check(document, "workers")
    assert workers["status"] == "ok"
    assert "eager" in workers["message"]
