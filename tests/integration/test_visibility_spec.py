"""Issue 23, item 8: labels in list_runs, what WorkflowStarted records, the category of an
activity's timeout failure."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import InvalidValueError, StartOptions, WorkflowStub, clock, executor
from durable_workflow.models import Task, WorkflowFailure
from durable_workflow.visibility import list_runs
from tests.integration.helpers import events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def started(instance_id, labels, **more):
    stub = WorkflowStub.make("tests.sleeper", instance_id)
    stub.start(60, options=StartOptions(labels=labels, **more))
    return stub


def test_list_runs_filters_by_labels(inline):
    started("lab-1", {"tenant": "acme", "tier": "gold"})
    started("lab-2", {"tenant": "acme", "tier": "silver"})
    started("lab-3", {"tenant": "globex"})
    started("lab-4", {"a__contains": "x"})  # a key is a key, never a lookup path

    def ids(**filters):
        return sorted(run.instance_id for run in list_runs(**filters))

    assert ids(labels={"tenant": "acme"}) == ["lab-1", "lab-2"]
    assert ids(labels={"tenant": "acme", "tier": "gold"}) == ["lab-1"]
    assert ids(labels={"tenant": "initech"}) == []
    assert ids(labels={"a__contains": "x"}) == ["lab-4"]
    assert ids(labels={'tenant") OR 1=1 --': "acme", "$.tenant": "acme"}) == []
    assert ids(labels={"tenant": "acme"}, workflow_type="tests.sleeper", limit=1) in (
        ["lab-1"],
        ["lab-2"],
    )
    with pytest.raises(InvalidValueError):
        list_runs(labels={"tenant": 3})


def test_workflow_started_records_visibility_and_deadlines(inline):
    stub = started(
        "lab-started",
        {"tenant": "acme"},
        memo={"note": "hi"},
        search_attributes={"customer": "acme", "priority": 2},
        execution_timeout_seconds=3600,
        run_timeout_seconds=600,
    )
    (event,) = events_of(stub, "WorkflowStarted")
    assert event["memo"] == {"note": "hi"}
    assert event["search_attributes"] == {"customer": "acme", "priority": 2}
    assert event["labels"] == {"tenant": "acme"}
    at = dt.datetime.fromisoformat
    run = stub.refresh()
    started_at = at(event["execution_deadline_at"]) - dt.timedelta(seconds=3600)
    assert at(event["run_deadline_at"]) == started_at + dt.timedelta(seconds=600)
    assert (event["execution_timeout_seconds"], event["run_timeout_seconds"]) == (3600, 600)
    assert run.describe().status in ("pending", "waiting")


def test_an_activity_timeout_is_a_failure_of_category_timeout(inline):
    stub = start("tests.timeouts", "lab-timeout", "schedule_to_close")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    clock.advance(dt.timedelta(seconds=6))
    assert executor.repair_pass().timed_out == 1
    row = WorkflowFailure.objects.get(run_id=stub.run_id(), source_kind="activity_execution")
    assert row.failure_category == "timeout"
    assert row.details["propagation_kind"] == "timeout"
    (timed_out,) = events_of(stub, "ActivityTimedOut")
    assert timed_out["failure_category"] == "timeout"
    assert timed_out["failure_id"] == str(row.id)
