"""Starting workflows: ids, duplicates, bad input, publishing only after commit."""

from __future__ import annotations

import pytest

from durable_workflow import (
    InvalidInstanceIdError,
    PayloadCodecError,
    StartOptions,
    UnknownTypeError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
    WorkflowStub,
)
from durable_workflow.models import (
    HistoryEvent,
    Task,
    WorkflowCommand,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.store import database
from tests.integration.helpers import start
from tests.testapp.workflows import Sequential

pytestmark = pytest.mark.django_db(transaction=True)


def test_make_reserves_the_instance():
    stub = WorkflowStub.make(Sequential, "order-123")
    assert stub.id() == "order-123"
    assert stub.status() == "reserved"
    assert stub.run_id() is None
    assert WorkflowInstance.objects.get(instance_id="order-123").status == "reserved"
    loaded = WorkflowStub.load("order-123")
    assert loaded.status() == "reserved" and not loaded.running()


def test_make_generates_an_id_when_none_is_given():
    stub = WorkflowStub.make(Sequential)
    assert len(stub.id()) == 32


@pytest.mark.parametrize("bad", ["", "has space", "slash/inside", "é", "x" * 192, 42])
def test_invalid_instance_ids_are_rejected(bad):
    with pytest.raises(InvalidInstanceIdError):
        WorkflowStub.make(Sequential, bad)
    assert not WorkflowInstance.objects.exists()


def test_longest_valid_id_is_accepted():
    instance_id = "a.b_c-d:" + "x" * 183
    assert len(instance_id) == 191
    assert WorkflowStub.make(Sequential, instance_id).id() == instance_id


def test_unknown_type_key_is_a_clear_error():
    with pytest.raises(UnknownTypeError, match="no-such-workflow"):
        WorkflowStub.make("no-such-workflow", "x-1")


def test_load_of_missing_instance_and_run():
    with pytest.raises(WorkflowNotFoundError):
        WorkflowStub.load("missing")
    with pytest.raises(WorkflowNotFoundError):
        WorkflowStub.load_run("not-a-uuid")


def test_start_result_and_run_state(inline):
    stub = WorkflowStub.make(Sequential, "start-1")
    result = stub.start("ada", options=StartOptions(business_key="order-9", labels={"t": "a"}))
    assert result.accepted and not result.rejected
    assert result.outcome == "started_new"
    assert result.run_id == stub.run_id()
    assert stub.status() == "pending" and stub.running()
    run = WorkflowRun.objects.get(id=stub.run_id())
    assert run.business_key == "order-9" and run.labels == {"t": "a"}
    assert run.payload_codec == "avro"
    command = WorkflowCommand.objects.get(id=result.command_id)
    assert (command.command_type, command.status, command.outcome) == (
        "start",
        "accepted",
        "started_new",
    )
    assert inline.sent["workflow"] == 1


def test_duplicate_start_is_rejected_by_default(inline):
    stub = start("tests.sequential", "dup-1", "ada")
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        WorkflowStub.load("dup-1").start("bob")
    assert info.value.reason == "instance_already_started"
    result = WorkflowStub.load("dup-1").attempt_start("bob")
    assert result.rejected
    assert (result.outcome, result.rejection_reason) == (
        "rejected_duplicate",
        "instance_already_started",
    )
    assert result.run_id == stub.run_id()
    assert WorkflowRun.objects.count() == 1
    rejected = WorkflowCommand.objects.filter(status="rejected")
    assert rejected.count() == 2
    assert {c.rejection_reason for c in rejected} == {"instance_already_started"}


def test_duplicate_start_can_return_the_existing_active_run(inline):
    stub = start("tests.sequential", "dup-2", "ada")
    again = WorkflowStub.load("dup-2").start("bob", options=StartOptions.return_existing_active())
    assert again.accepted and again.outcome == "returned_existing_active"
    assert again.run_id == stub.run_id()
    inline.run()
    # once closed there is nothing active to return: the start is rejected
    closed = WorkflowStub.load("dup-2").attempt_start(options=StartOptions.return_existing_active())
    assert closed.rejected and closed.rejection_reason == "instance_already_started"


def test_unencodable_arguments_write_nothing(inline):
    stub = WorkflowStub.make(Sequential, "bad-args")
    with pytest.raises(PayloadCodecError) as info:
        stub.start({"items": [1, {"when": object()}]})
    assert info.value.reason == "unsupported_value_type"
    assert info.value.path == 'argument 1 → "items"[1] → "when"'
    assert info.value.value_type == "object"
    assert not WorkflowRun.objects.exists()
    assert not HistoryEvent.objects.exists()
    assert not Task.objects.exists()
    assert inline.sent == {}


def test_messages_are_only_published_after_commit(inline):
    with pytest.raises(RuntimeError), database.atomic():
        start("tests.sequential", "rolled-back", "ada")
        assert inline.sent == {}  # not yet: the transaction is still open
        raise RuntimeError("roll back")
    assert inline.sent == {}
    assert not WorkflowRun.objects.exists()
    start("tests.sequential", "committed", "ada")
    assert inline.sent["workflow"] == 1


def test_start_options_validate_timeouts():
    from durable_workflow import ConfigurationError

    with pytest.raises(ConfigurationError, match="at least 1 second"):
        StartOptions(execution_timeout_seconds=0)
