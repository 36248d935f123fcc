"""Handlers that finish cleanly: ``dw.all_handlers_finished``, ``dw.Lock``, ``dw.Semaphore``."""

from __future__ import annotations

import pytest

import durable_workflow as dw
from durable_workflow import WorkflowStub
from durable_workflow.testing import Replayer
from tests.integration.helpers import events_of

pytestmark = pytest.mark.django_db(transaction=True)


def run_guarded(instance_id: str, updates: list[tuple[str, str]], *, wait: bool = True):
    """Every update reaches the run before any timer fires; then time is skipped."""
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.patterns.guarded", instance_id)
        stub.start(wait)
        ids = [stub.submit_update(name, tag).update_id for name, tag in updates]
        stub.submit_update("finish")
        WorkflowStub.run_ready_tasks(skip_time=True)
        return stub.refresh(), ids


def test_a_lock_grants_waiters_one_at_a_time_in_order():
    stub, _ = run_guarded("lock-1", [("locked", "a"), ("locked", "b"), ("locked", "c")])
    assert stub.output() == ["a:in", "a:out", "b:in", "b:out", "c:in", "c:out"]
    assert Replayer().replay_run(stub.run_id()).closed_by == "WorkflowCompleted"


def test_a_semaphore_lets_two_in():
    stub, _ = run_guarded("sem-1", [("paired", "a"), ("paired", "b"), ("paired", "c")])
    # a's permit passes straight to c, which goes in before b's timer is delivered.
    assert stub.output() == ["a:in", "b:in", "a:out", "c:in", "b:out", "c:out"]


def test_the_body_waits_for_every_handler_before_it_completes():
    stub, ids = run_guarded("wait-1", [("locked", "a"), ("locked", "b")])
    assert stub.output() == ["a:in", "a:out", "b:in", "b:out"]
    assert [stub.inspect_update(i).result for i in ids] == ["a", "b"]


def test_an_update_the_body_did_not_wait_for_fails_with_a_reason():
    stub, ids = run_guarded("nowait-1", [("locked", "a"), ("locked", "b")], wait=False)
    assert stub.output() == ["a:in"]
    first, second = (stub.inspect_update(i) for i in ids)
    assert first.update_status == second.update_status == "failed"
    assert first.failure_message == "the workflow run closed (completed) before the update finished"
    abandoned = [e for e in events_of(stub, "UpdateCompleted") if e.get("exception_type")]
    assert [e["exception_type"] for e in abandoned] == ["UpdateAbandoned"] * 2
    assert stub.history()[-1].event_type == "WorkflowCompleted"


def test_locks_only_inside_a_workflow():
    with pytest.raises(dw.NotInWorkflowError):
        dw.Lock()
    with pytest.raises(dw.NotInWorkflowError):
        dw.all_handlers_finished()


@pytest.mark.parametrize("close", ["terminate", "cancel"])
def test_closing_from_outside_fails_the_open_updates_too(close):
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.patterns.guarded", f"close-{close}")
        stub.start()
        running = stub.submit_update("locked", "a").update_id
        waiting = stub.submit_update("locked", "b").update_id
        getattr(stub, close)("stop")
        for update_id in (running, waiting):
            result = stub.inspect_update(update_id)
            assert result.update_status == "failed", result
            assert "before the update finished" in (result.failure_message or "")
