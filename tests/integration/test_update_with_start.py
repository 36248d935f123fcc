"""Update-with-start: start the workflow if needed and submit an update, in one transaction."""

from __future__ import annotations

import pytest

from durable_workflow import (
    StartOptions,
    UpdateRejectedError,
    WorkflowAlreadyStartedError,
    WorkflowStub,
)
from durable_workflow.models import WorkflowCommand, WorkflowRun, WorkflowUpdate

pytestmark = pytest.mark.django_db(transaction=True)


def group_of(instance_id: str) -> list[tuple[str, str, str]]:
    rows = WorkflowCommand.objects.filter(instance_id=instance_id).order_by("created_at", "id")
    return [
        (row.command_type, row.payload.get("intake_mode"), row.payload.get("intake_group_id"))
        for row in rows
    ]


def test_starts_then_reuses_the_active_run():
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.approval", "uws-1")
        assert stub.update_with_start("add-item", "a", start_args=["updates"]) == 1
        first_run = stub.run_id()
        again = stub.attempt_update_with_start("add-item", "b", start_args=["updates"])
        assert again.start.outcome == "returned_existing_active"
        assert again.update.result == 2 and stub.run_id() == first_run
    kinds = group_of("uws-1")
    assert [k[:2] for k in kinds] == [
        ("start", "update_with_start"),
        ("update", "update_with_start"),
    ] * 2
    assert kinds[0][2] == kinds[1][2] != kinds[2][2]  # one intake group per call


def test_reject_duplicate_refuses_the_start_and_submits_nothing():
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.approval", "uws-2")
        stub.start("updates")
        with pytest.raises(WorkflowAlreadyStartedError):
            stub.update_with_start(
                "add-item", "x", start_args=["updates"], options=StartOptions.reject_duplicate()
            )
    assert not WorkflowUpdate.objects.filter(instance_id="uws-2").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "outcome"),
    [
        ("no-such-update", [1], "rejected_unknown_update"),
        ("add-item", [1, 2, 3], "rejected_invalid_arguments"),
    ],
)
def test_a_refused_update_starts_no_run(name, arguments, outcome):
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.approval", f"uws-{outcome}")
        result = stub.submit_update_with_start(name, *arguments, start_args=["updates"])
    assert result.start is None and result.update.outcome == outcome
    assert not WorkflowRun.objects.filter(instance_id=f"uws-{outcome}").exists()


def test_the_validator_runs_against_the_run_it_reaches():
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.approval", "uws-validator")
        with pytest.raises(UpdateRejectedError):
            stub.update_with_start("mark-ready", "not a bool", start_args=["condition", 60])
        assert stub.refresh().running()  # the start stays: only the update was refused
