"""Archive: closed runs leave the default lists; open runs are refused; nothing is deleted."""

from __future__ import annotations

import pytest

from durable_workflow import CommandRejected, InvalidValueError, WorkflowStub
from durable_workflow.models import HistoryEvent, WorkflowCommand, WorkflowRun
from durable_workflow.testing.replayer import Replayer
from durable_workflow.visibility import list_runs
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def _closed(inline, how: str, instance_id: str) -> WorkflowStub:
    """A run closed ``completed``, ``failed``, ``cancelled`` or ``terminated``."""
    if how == "completed":
        stub = start("tests.sequential", instance_id, "ada")
    elif how == "failed":
        stub = start("tests.crashes", instance_id, "boom")
    else:
        stub = start("tests.approval", instance_id, "signal")
        inline.run()
        stub.cancel("not needed") if how == "cancelled" else stub.terminate("stuck")
    inline.run()
    assert stub.refresh().status() == how
    return stub


@pytest.mark.parametrize("how", ["completed", "failed", "cancelled", "terminated"])
def test_archiving_a_closed_run(inline, how):
    stub = _closed(inline, how, f"arc-{how}")
    before = len(stub.history())
    result = stub.archive("retention_policy")
    assert result.accepted and result.outcome == "archived"
    assert result.metadata == {"archived_run_ids": [stub.run_id()]}
    assert stub.archived_at() is not None and stub.status() == how
    history = stub.history()
    assert len(history) == before + 1 and history[-1].event_type == "WorkflowArchived"
    assert history[-1].payload == {"command_id": result.command_id, "reason": "retention_policy"}
    command = WorkflowCommand.objects.get(id=result.command_id)
    assert (command.command_type, command.status, command.outcome) == (
        "archive",
        "accepted",
        "archived",
    )
    assert command.reason == "retention_policy" and str(command.run_id) == stub.run_id()
    # The body's history still replays: the event after the close is not the body's.
    replayed = Replayer().replay_run(stub.run_id())
    if how == "completed":
        assert replayed.closed_by == "WorkflowCompleted"


def test_an_open_run_is_refused_and_recorded(inline):
    stub = start("tests.approval", "arc-open", "signal")
    inline.run()
    with pytest.raises(CommandRejected) as caught:
        stub.archive("too early")
    assert caught.value.outcome == "rejected_run_not_closed"
    assert caught.value.reason == "run_not_closed"
    result = stub.attempt_archive()
    assert result.rejected and result.rejection_reason == "run_not_closed"
    assert stub.archived_at() is None
    assert "WorkflowArchived" not in event_types(stub)
    rows = WorkflowCommand.objects.filter(instance_id="arc-open", command_type="archive")
    assert (
        sorted(rows.values_list("status", "outcome", "rejection_reason"))
        == [("rejected", "rejected_run_not_closed", "run_not_closed")] * 2
    )


def test_archiving_twice_is_not_needed(inline):
    stub = _closed(inline, "completed", "arc-twice")
    first = stub.archive()
    archived_at = stub.archived_at()
    again = stub.archive("again")
    assert again.accepted and again.outcome == "archive_not_needed" and again.metadata == {}
    assert again.command_id != first.command_id
    assert stub.refresh().archived_at() == archived_at
    assert event_types(stub).count("WorkflowArchived") == 1


def test_a_repeated_request_id_gives_the_first_answer(inline):
    stub = _closed(inline, "completed", "arc-request")
    first = stub.archive(request_id="req-1")
    again = stub.archive(request_id="req-1")
    assert again.outcome == "archived" and again.command_id == first.command_id
    assert (
        WorkflowCommand.objects.filter(instance_id="arc-request")
        .filter(command_type="archive")
        .count()
        == 1
    )


def test_hostile_reason_is_refused_before_anything_is_written(inline):
    stub = _closed(inline, "completed", "arc-hostile")
    with pytest.raises(InvalidValueError):
        stub.archive("nul\x00byte")
    assert not WorkflowCommand.objects.filter(command_type="archive").exists()
    assert stub.refresh().archived_at() is None


def test_unknown_instance_or_foreign_run(inline):
    other = _closed(inline, "completed", "arc-other")
    stub = _closed(inline, "completed", "arc-mine")
    from durable_workflow.exceptions import WorkflowNotFoundError
    from durable_workflow.executor.archiving import request_archive

    with pytest.raises(WorkflowNotFoundError):
        request_archive("arc-nobody")
    with pytest.raises(WorkflowNotFoundError):
        request_archive(stub.id(), run_id=other.run_id())
    with pytest.raises(WorkflowNotFoundError):
        request_archive(stub.id(), run_id="not-a-uuid")


def test_default_lists_hide_archived_runs_and_a_filter_finds_them(inline):
    kept = _closed(inline, "completed", "arc-list-kept")
    gone = _closed(inline, "failed", "arc-list-gone")
    gone.archive("done with it")

    def ids(**filters):
        return {row.instance_id for row in list_runs(**filters)}

    assert ids() == {"arc-list-kept"}
    assert ids(status="failed") == set()
    assert ids(archived=True) == {"arc-list-gone"}
    assert ids(archived=None) == {"arc-list-kept", "arc-list-gone"}
    (row,) = list_runs(archived=True)
    assert row.archived_at == gone.archived_at() and row.status == "failed"
    assert list_runs(instance_id="arc-list-kept")[0].archived_at is None
    with pytest.raises(InvalidValueError):
        list_runs(archived="yes")
    # The run itself is still there to read: history, output, describe.
    assert WorkflowStub.load("arc-list-gone").describe() is not None
    assert HistoryEvent.objects.filter(run_id=gone.run_id()).exists()
    assert kept.refresh().archived_at() is None


def _chain(inline, instance_id: str) -> WorkflowStub:
    """A looper continued once: run 1 closed (continued), run 2 waiting."""
    stub = start("tests.looper", instance_id, 2)
    inline.run()
    stub.signal("tick")
    inline.run()
    assert (
        stub.refresh().run_id()
        != WorkflowRun.objects.get(instance_id=instance_id, run_number=1).pk.__str__()
    )
    return stub


def test_an_instance_archives_every_run_of_its_chain(inline):
    stub = _chain(inline, "arc-chain")
    assert stub.attempt_archive().outcome == "rejected_run_not_closed"
    stub.signal("tick")
    inline.run()
    assert stub.refresh().completed()
    result = stub.archive("chain done")
    runs = WorkflowRun.objects.filter(instance_id="arc-chain").order_by("run_number")
    assert result.metadata["archived_run_ids"] == [str(run.pk) for run in runs]
    assert all(run.archived_at is not None for run in runs)
    for run in runs:
        last = HistoryEvent.objects.filter(run_id=run.pk).order_by("sequence").last()
        assert last.event_type == "WorkflowArchived"
    assert list_runs(instance_id="arc-chain") == []
    assert len(list_runs(instance_id="arc-chain", archived=True)) == 2


def test_a_pinned_stub_archives_one_closed_run_while_the_instance_runs(inline):
    stub = _chain(inline, "arc-pinned")
    first = WorkflowRun.objects.get(instance_id="arc-pinned", run_number=1)
    pinned = WorkflowStub.load_run(first.pk)
    result = pinned.archive("old generation")
    assert result.outcome == "archived" and result.target_scope == "run"
    assert result.metadata == {"archived_run_ids": [str(first.pk)]}
    assert pinned.archived_at() is not None
    assert stub.refresh().running() and stub.archived_at() is None
    assert events_of(pinned, "WorkflowArchived")[0]["reason"] == "old generation"
    assert [row.run_number for row in list_runs(instance_id="arc-pinned")] == [2]
