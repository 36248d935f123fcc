"""A step whose settle fails hands its lease back at once (issue 31, item 4).

An eager activity ran, then its connection was killed before the result was
recorded: the error was only logged and the task stayed leased until the lease ran
out (two runs waited about 300 s in production-style runs). Now the task is made
ready again, on a fresh connection, and its message is sent for another attempt.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

import durable_workflow as dw
from durable_workflow import Activity, Workflow, executor
from durable_workflow.executor import dispatch, sticky
from durable_workflow.models import ActivityAttempt, Task
from tests.engine_db import connection
from tests.integration.helpers import Recorder, start, terminate_backend

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="terminates a PostgreSQL backend"),
]

_killed: list[int] = []


class KillsItsConnection(Activity):
    """Returns normally, but the worker's connection is killed before the settle (the
    first attempt only)."""

    type_key = "tests.handback.kills-its-connection"

    def handle(self, value: int) -> int:
        if self.attempt_count() == 1:
            connection.ensure_connection()
            pid = connection.connection.info.backend_pid
            _killed.append(pid)
            terminate_backend(pid)
        return value + 1


class OneStep(Workflow):
    type_key = "tests.handback.one-step"

    def handle(self, value: int) -> Any:
        return dw.activity(KillsItsConnection, value)


@pytest.fixture
def recorder():
    sticky.cache.clear()
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    eager = {**settings.DURABLE_WORKFLOW, "EAGER_ACTIVITIES": True, "EAGER_WORKFLOW_TASKS": True}
    with override_settings(DURABLE_WORKFLOW=eager):
        yield backend
    dispatch.set_backend(previous)
    sticky.cache.clear()


def test_an_eager_activity_whose_settle_fails_is_handed_back_at_once(recorder):
    stub = start("tests.handback.one-step", "handback-1", 41)
    first = Task.objects.get(run_id=stub.run_id(), status="ready")
    recorder.sent.clear()
    # The workflow task leases the activity to itself, runs it after its commit, and
    # the settle meets a killed connection: logged, and the message still succeeds.
    assert executor.run_workflow_task(first.id) == "completed"
    assert _killed
    activity = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    assert (activity.status, activity.lease_owner) == ("ready", None)  # not held to expiry
    assert [kind for kind, _, _ in recorder.sent] == ["activity"]  # sent for another worker
    [attempt] = ActivityAttempt.objects.filter(execution__run_id=stub.run_id())
    assert attempt.status == "expired"  # counts like a lease that ran out
    recorder.sent.clear()
    assert executor.run_activity_task(activity.id) == "completed"  # attempt 2
    # A result after a lost attempt wakes a regular workflow task (its first attempt
    # counted, executor.poison) rather than running the body in place.
    assert [kind for kind, _, _ in recorder.sent] == ["workflow"]
    woken = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    assert executor.run_workflow_task(woken.id) == "completed"
    assert stub.refresh().output() == 42
