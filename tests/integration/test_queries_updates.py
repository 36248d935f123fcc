"""Queries, updates (with validators) and condition waits."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection

from durable_workflow import (
    CommandRejected,
    QueryFailedError,
    UpdateFailedError,
    WorkflowStub,
    clock,
)
from durable_workflow.models import HistoryEvent, WorkflowCommand, WorkflowUpdate
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def history_count(stub):
    return HistoryEvent.objects.filter(run_id=stub.run_id()).count()


@pytest.fixture
def worker_thread(inline):
    """Drain tasks in a background thread, as a worker would, while the test waits."""
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                inline.run()
                time.sleep(0.02)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


def test_query_a_running_workflow_without_writing(inline):
    stub = start("tests.approval", "q-1", "signal")
    inline.run()
    before = history_count(stub)
    commands = WorkflowCommand.objects.count()
    assert stub.query("current-stage") == "waiting"
    assert stub.query("starts_with", "wait") is True  # method name works as well
    assert stub.query("starts_with", "appr") is False
    assert history_count(stub) == before
    assert WorkflowCommand.objects.count() == commands
    assert stub.refresh().status() == "waiting"


def test_accepted_but_unapplied_signals_are_not_visible_to_queries(inline):
    stub = start("tests.approval", "q-2", "signal")
    inline.run()
    stub.signal("approved-by", "x")
    assert stub.query("current-stage") == "waiting"
    inline.run()
    assert stub.query("current-stage") == "approved"


def test_query_a_completed_run_and_a_pinned_run(inline):
    stub = start("tests.approval", "q-3", "signal")
    stub.signal("approved-by", "x")
    inline.run()
    assert stub.refresh().completed()
    assert stub.query("current-stage") == "approved"
    assert WorkflowStub.load_run(stub.run_id()).query("current-stage") == "approved"


def test_query_errors_are_clear(inline):
    stub = start("tests.approval", "q-4", "signal")
    inline.run()
    with pytest.raises(QueryFailedError) as unknown:
        stub.query("nope")
    assert unknown.value.reason == "rejected_unknown_query"
    with pytest.raises(QueryFailedError) as bad_args:
        stub.query("starts_with")
    assert bad_args.value.reason == "invalid_query_arguments"
    assert bad_args.value.metadata["validation_errors"]
    with pytest.raises(QueryFailedError, match="cannot call durable helpers") as sneaky:
        stub.query("sneaky")
    assert sneaky.value.reason == "query_rejected"
    assert "ActivityScheduled" not in event_types(stub)
    with pytest.raises(QueryFailedError):
        WorkflowStub.make("tests.approval", "q-unstarted").query("current-stage")


def test_update_is_applied_and_returns_its_result(inline, worker_thread):
    stub = start("tests.approval", "u-1", "condition-forever")
    assert stub.update("mark-ready", True) == {"ready": True}
    stub.wait(timeout=10)
    assert stub.output() == [True, []]
    types = event_types(stub)
    assert types.index("UpdateAccepted") < types.index("UpdateApplied")
    assert types.index("UpdateApplied") < types.index("UpdateCompleted")
    assert "ConditionWaitSatisfied" in types
    update = WorkflowUpdate.objects.get()
    assert update.status == "completed"
    assert WorkflowCommand.objects.get(command_type="update").outcome == "update_completed"


def test_submit_and_inspect_update(inline):
    stub = start("tests.approval", "u-2", "updates")
    inline.run()
    submitted = stub.submit_update("add-item", "a")
    assert submitted.accepted and not submitted.completed
    assert submitted.update_status == "accepted" and submitted.result is None
    assert stub.inspect_update(submitted.update_id).update_status == "accepted"
    inline.run()
    latest = stub.inspect_update(submitted.update_id)
    assert latest.completed and latest.result == 1
    assert latest.outcome == "update_completed"
    assert latest.closed_at is not None


def test_update_wait_times_out_when_no_worker_runs(inline):
    stub = start("tests.approval", "u-3", "updates")
    inline.run()
    result = stub.attempt_update("add-item", "a", wait_timeout=0.2)
    assert result.accepted and result.wait_timed_out
    assert result.update_status == "accepted"


def test_validator_rejects_before_anything_changes(inline):
    stub = start("tests.approval", "u-4", "condition-forever")
    inline.run()
    rejected = stub.attempt_update("mark-ready", "yes")
    assert rejected.rejected and not rejected.accepted
    assert rejected.outcome == "rejected_invalid_arguments"
    assert rejected.validation_errors == {"update": ["ready must be a boolean"]}
    assert events_of(stub, "UpdateRejected")[0]["update_name"] == "mark-ready"
    assert "UpdateAccepted" not in event_types(stub)
    with pytest.raises(CommandRejected):
        stub.update("mark-ready", "yes")
    inline.run()
    assert stub.query("snapshot")["ready"] is False
    assert stub.refresh().status() == "waiting"


def test_unknown_update_and_bad_arguments(inline):
    stub = start("tests.approval", "u-5", "updates")
    inline.run()
    unknown = stub.attempt_update("nope")
    assert unknown.outcome == "rejected_unknown_update"
    bad = stub.attempt_update("add-item")
    assert bad.outcome == "rejected_invalid_arguments"
    assert "arguments" in bad.validation_errors


def test_failed_update_leaves_the_run_open_and_replays(inline, worker_thread):
    stub = start("tests.approval", "u-6", "updates")
    assert stub.update("add-item", "a") == 1
    with pytest.raises(UpdateFailedError, match="no booms"):
        stub.update("add-item", "boom")
    assert stub.refresh().running()
    assert stub.update("add-item", "c") == 3
    stub.wait(timeout=10)
    # replay of the whole history reproduces the same state, the failed update included
    assert stub.output() == ["a", "half-done", "c"]
    assert stub.query("snapshot")["items"] == ["a", "half-done", "c"]
    failed = [u for u in events_of(stub, "UpdateCompleted") if "failure_id" in u]
    assert len(failed) == 1 and failed[0]["message"] == "no booms allowed"


def test_update_rejected_while_a_signal_is_pending(inline):
    stub = start("tests.approval", "u-7", "updates")
    inline.run()
    stub.signal("ping", 1)  # buffered, never consumed by this mode
    result = stub.attempt_update("add-item", "a")
    assert result.outcome == "rejected_pending_signal"


def test_updates_on_closed_runs_are_rejected(inline):
    stub = start("tests.approval", "u-8", "signal")
    stub.signal("approved-by", "x")
    inline.run()
    result = stub.attempt_update("add-item", "a")
    assert (result.outcome, result.rejection_reason) == ("rejected_not_active", "run_not_active")


def test_condition_satisfied_by_an_update_before_the_timeout(inline):
    stub = start("tests.approval", "c-1", "condition", 60)
    inline.run()
    stub.submit_update("mark-ready", True)
    inline.run()
    stub.refresh()
    assert stub.output() is True
    types = event_types(stub)
    assert "ConditionWaitSatisfied" in types and "TimerCancelled" in types
    opened = events_of(stub, "ConditionWaitOpened")
    assert len(opened) == 1
    assert opened[0]["condition_key"] == "approval.ready"
    assert opened[0]["timeout_seconds"] == 60


def test_condition_times_out(inline):
    stub = start("tests.approval", "c-2", "condition", 60)
    inline.run()
    clock.advance(dt.timedelta(seconds=61))
    inline.run()
    stub.refresh()
    assert stub.output() is False
    assert "ConditionWaitTimedOut" in event_types(stub)


def test_wait_with_timeout_writes_the_same_history_as_wait(inline):
    a = start("tests.approval", "c-3a", "condition", 30)
    b = start("tests.approval", "c-3b", "with-timeout", 30)
    inline.run()
    clock.advance(dt.timedelta(seconds=31))
    inline.run()
    strip = {"condition_wait_id", "timer_id", "fire_at", "fired_at"}

    def shape(stub):
        return [
            (e.event_type, {k: v for k, v in e.payload.items() if k not in strip})
            for e in stub.history()
            if e.event_type.startswith(("Condition", "Timer"))
        ]

    assert shape(a) == shape(b)
    assert a.refresh().output() is False and b.refresh().output() is False


def test_invalid_condition_key_parks_the_run(inline):
    """A bad key is a bug in the body: the run waits, open, for a fix and a repair."""
    from tests.testapp.messaging import Approval

    original = Approval.handle

    def handle(self, mode, timeout=60):
        import durable_workflow as dw

        return dw.wait(lambda: True, condition_key="not valid!")

    Approval.handle = handle
    try:
        stub = start("tests.approval", "c-4", "x")
        inline.run()
    finally:
        Approval.handle = original
    assert stub.refresh().running()
    failure = stub.describe().task_failure
    assert failure is not None and "condition wait keys" in failure.message.lower()


def test_interleaved_signals_replay_to_the_same_state(inline):
    stub = start("tests.approval", "det-1", "many")
    for value in range(1, 6):
        stub.signal("ping", value)
        inline.run()
        assert stub.query("snapshot")["seen"] == list(range(1, value + 1))
    assert stub.refresh().output() == [1, 2, 3, 4, 5]
