"""``dw.info()`` and ``dw.activity_info()``: typed, frozen, replay-stable."""

from __future__ import annotations

import dataclasses

import pytest

import durable_workflow as dw
from durable_workflow import StartOptions, WorkflowStub
from durable_workflow.testing import Replayer
from tests.integration.helpers import events_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_workflow_info_as_of_the_point_of_history(inline):
    stub = WorkflowStub.make("tests.patterns.introspects", "info-1")
    stub.start(options=StartOptions(memo={"stage": "before", "team": "ops"}))
    inline.run()
    out = stub.refresh().output()
    assert out["ids"] == ["info-1", stub.run_id(), 1, "tests.patterns.introspects"]
    [started] = [e for e in stub.history() if e.event_type == "WorkflowStarted"]
    assert out["started_at"] == started.recorded_at.isoformat()
    assert out["task_attempt"] == 1
    first, after = out["lengths"]
    assert 0 < first < after
    assert out["memo"] == [{"stage": "before", "team": "ops"}, {"stage": "after", "team": "ops"}]
    assert out["queue"] is None  # DEFAULT_QUEUE: Celery's default queue
    assert out["child_parent"] == ["info-1", stub.run_id()]
    assert Replayer().replay_run(stub.run_id()).closed_by == "WorkflowCompleted"


def test_activity_info_and_the_previous_attempts_heartbeat(inline):
    stub = WorkflowStub.make("tests.patterns.introspects", "info-2")
    stub.start()
    inline.run()
    activity = stub.refresh().output()["activity"]
    assert activity == {
        "activity_id": True,
        "type": "tests.patterns.reports-info",
        "attempt": 2,
        "workflow": ["info-2", "tests.patterns.introspects"],
        "previous_heartbeat": {"message": "half way", "current": 5, "total": 10},
        "times": [True, True],
        "token": True,
    }


def test_info_is_frozen_and_only_inside_its_code():
    info = dw.WorkflowInfo(
        instance_id="i",
        run_id="r",
        run_number=1,
        workflow_type="t",
        parent_instance_id=None,
        parent_run_id=None,
        continued_from_run_id=None,
        started_at=None,
        task_attempt=1,
        history_length=0,
        history_size=0,
        queue=None,
        memo={},
        search_attributes={},
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.run_id = "other"  # type: ignore[misc]
    with pytest.raises(dw.NotInWorkflowError):
        dw.info()
    with pytest.raises(dw.NotInActivityError):
        dw.activity_info()


def test_a_continued_run_knows_where_it_came_from(inline):
    stub = WorkflowStub.make("tests.patterns.carry", "info-can")
    stub.start([], 2)
    inline.run()
    first = stub.run_id()
    stub.signal("add", "x")
    stub.signal("add", "y")
    inline.run()
    [started] = events_of(stub.refresh(), "WorkflowStarted")
    assert started["continued_from_run_id"] == first and started["memo"] == {}
