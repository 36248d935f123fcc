"""Replaying recorded runs straight from the database, and exporting them."""

from __future__ import annotations

import json

import pytest

import durable_workflow as dw
from durable_workflow import NonDeterminismError, WorkflowNotFoundError, WorkflowStub
from durable_workflow.testing import Replayer, export_history
from tests.testapp import workflows
from tests.testapp.messaging import Handlers


def test_export_and_replay_a_recorded_run(workflow_fake, tmp_path):
    stub = WorkflowStub.make("tests.sequential", "recorded-1")
    stub.start("Ada")
    document = export_history(stub.run_id())
    assert set(document) == {
        "workflow_type",
        "instance_id",
        "run_id",
        "payload_codec",
        "workflow_task_sequence",
        "events",
    }
    assert document["workflow_task_sequence"] == 9
    assert document["workflow_type"] == "tests.sequential"
    assert document["instance_id"] == "recorded-1" and document["run_id"] == stub.run_id()
    assert [e["sequence"] for e in document["events"]] == list(range(1, 10))
    assert document["events"][-1]["event_type"] == "WorkflowCompleted"

    replayer = Replayer()
    by_id = replayer.replay(stub.run_id())
    assert by_id.closed_by == "WorkflowCompleted" and by_id.steps == 2
    assert replayer.replay(document) == by_id
    path = tmp_path / "history.json"
    path.write_text(json.dumps(document))
    assert replayer.replay(path) == by_id
    assert replayer.replay_file(str(path)) == by_id


def test_a_recorded_run_against_changed_code(workflow_fake, monkeypatch):
    stub = WorkflowStub.make("tests.sequential", "recorded-2")
    stub.start("Ada")
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)
    with pytest.raises(NonDeterminismError, match="step 2"):
        Replayer().replay_run(stub.run_id())


def test_an_open_run_replays_up_to_where_it_is(workflow_fake):
    stub = WorkflowStub.make("tests.approval", "recorded-3")
    stub.start("signal")
    result = Replayer().replay_run(stub.run_id())
    assert result.closed_by is None


class NoisyHandlers(Handlers):
    """tests.handlers whose signal handler now records a side effect as well."""

    abstract = True

    @dw.signal("note")
    def on_note(self, reason):
        self.reasons.append(dw.side_effect(lambda: reason.upper()))


@pytest.mark.django_db
def test_an_open_run_must_stop_exactly_where_its_last_task_stopped(inline):
    stub = WorkflowStub.make("tests.handlers", "recorded-5")
    stub.start(2)
    stub.signal("note", "first")
    inline.run()
    stub.signal("note", "second")  # recorded, but no workflow task has seen it yet
    document = export_history(stub.run_id())
    assert document["events"][-1]["event_type"] == "SignalReceived"
    assert document["workflow_task_sequence"] == len(document["events"]) - 1

    result = Replayer().replay(document)
    assert result.events == len(document["events"]) - 1 and result.closed_by is None

    replayer = Replayer({"tests.handlers": NoisyHandlers})
    with pytest.raises(NonDeterminismError, match="does not hold") as info:
        replayer.replay(document)
    assert info.value.requested == "SideEffectRecorded"
    del document["workflow_task_sequence"]  # without it an open history may go on
    assert replayer.replay(document).closed_by is None


def test_the_operations_export_bundle_is_accepted(workflow_fake):
    stub = WorkflowStub.make("tests.sequential", "recorded-6")
    stub.start("Cy")
    document = export_history(stub.run_id())
    bundle = {
        "schema": "durable-workflow.v2.history-export",
        "workflow": {"workflow_type": "tests.sequential", "instance_id": "recorded-6"},
        "selected_run": {
            "run_id": stub.run_id(),
            "payload_codec": document["payload_codec"],
            "workflow_task_sequence": document["workflow_task_sequence"],
        },
        "history_events": document["events"],
    }
    result = Replayer().replay(bundle)
    assert (result.run_id, result.closed_by, result.steps) == (
        stub.run_id(),
        "WorkflowCompleted",
        2,
    )


def test_workflow_classes_can_be_given_explicitly(workflow_fake):
    stub = WorkflowStub.make("tests.sequential", "recorded-4")
    stub.start("Bo")
    assert Replayer([workflows.Sequential]).replay(stub.run_id()).steps == 2


@pytest.mark.django_db
def test_unknown_runs():
    with pytest.raises(WorkflowNotFoundError):
        export_history("not-a-uuid")
    with pytest.raises(WorkflowNotFoundError):
        export_history("01a2270d-2eb6-75ae-9a87-53d8bd52a74b")


def test_a_bundle_from_the_history_export_command_replays(workflow_fake):
    from durable_workflow.operations.export import build_bundle

    stub = WorkflowStub.make("tests.approval", "recorded-7")
    stub.start("signal")
    stub.signal("approved-by", "Di")
    result = Replayer().replay(build_bundle("recorded-7"))
    assert (result.instance_id, result.run_id) == ("recorded-7", stub.run_id())
    assert result.closed_by == "WorkflowCompleted"
