"""Processes whose clocks disagree (found by the reliability suite's clock scenario).

A task row carries the ``available_at`` of the process that wrote it. A worker whose
clock is behind that process's sees the task as not due yet when its message arrives.
"""

from __future__ import annotations

import pytest

from durable_workflow import executor
from durable_workflow.models import Task
from durable_workflow.testing import travel
from tests.integration.helpers import start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_workflow_task_not_due_on_this_clock_waits_for_it(inline):
    stub = start("tests.sequential", "skew-sequential", "Ada")
    task = tasks_of(stub, "workflow")[0]
    sent = inline.sent["workflow"]
    with travel(seconds=-10):  # this worker's clock is 10 s behind the starter's
        # The message is sent again for when the task is due here; nothing is lost
        # (a refuted claim used to escape as an error and its message was acked).
        assert executor.run_workflow_task(task.id) == "early"
    assert Task.objects.get(id=task.id).status == "ready"
    assert inline.sent["workflow"] == sent + 1
    inline.run()
    assert stub.refresh().status() == "completed"
