"""``failure_recorded``: one signal per committed failure row, whatever its source."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
from django.test import override_settings

from durable_workflow import StartOptions, WorkflowStub, clock, executor, signals
from durable_workflow.models import WorkflowFailure
from durable_workflow.store import database
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def received():
    """Every ``failure_recorded`` and lifecycle signal, in the order they were sent."""
    seen: list[tuple[str, object]] = []

    def on_failure(sender, event, **kwargs):
        seen.append(("FailureRecorded", event))

    def on_lifecycle(sender, event, **kwargs):
        seen.append((event.event_type, event))

    lifecycle = [signals.activity_failed, signals.workflow_failed, signals.workflow_terminated]
    signals.failure_recorded.connect(on_failure, weak=False, dispatch_uid="test-failures")
    for signal in lifecycle:
        signal.connect(on_lifecycle, weak=False, dispatch_uid="test-failures")
    yield seen
    signals.failure_recorded.disconnect(dispatch_uid="test-failures")
    for signal in lifecycle:
        signal.disconnect(dispatch_uid="test-failures")


def failures(received):
    return [event for kind, event in received if kind == "FailureRecorded"]


def test_an_activity_failure_and_the_run_it_fails(inline, received):
    stub = start("tests.retrying", "fr-1", 5, 1)
    inline.run()
    assert stub.refresh().failed()
    kinds = [kind for kind, _ in received]
    assert kinds == ["FailureRecorded", "ActivityFailed", "FailureRecorded", "WorkflowFailed"]
    activity, run = failures(received)
    rows = {str(row.id): row for row in WorkflowFailure.objects.filter(run_id=stub.run_id())}
    assert set(rows) == {activity.failure_id, run.failure_id}
    assert activity.source_kind == "activity_execution"
    assert activity.source_id == rows[activity.failure_id].source_id
    assert activity.exception_type == rows[activity.failure_id].exception_type
    assert activity.message == "attempt 1 declined"
    assert (run.source_kind, run.source_id) == ("workflow_run", stub.run_id())
    assert run.failure_category == "application"
    assert (run.instance_id, run.run_id) == ("fr-1", stub.run_id())
    assert run.workflow_type == "tests.retrying"
    assert run.workflow_class == "tests.testapp.workflows.Retrying"


def test_a_failed_update_is_recorded_and_announced(inline, received):
    stub = start("tests.approval", "fr-2", "updates")
    inline.run()
    stub.submit_update("add-item", "boom")
    inline.run()
    (update,) = failures(received)
    assert update.source_kind == "workflow_update"
    assert update.message == "no booms allowed"
    assert stub.refresh().running()


def test_a_timed_out_run_is_a_failure_and_sends_workflow_failed(inline, received):
    stub = WorkflowStub.make("tests.sleeper", "fr-3")
    stub.start(3600, options=StartOptions(run_timeout_seconds=60))
    inline.run()
    clock.advance(dt.timedelta(seconds=61))
    assert executor.repair_pass().timed_out == 1
    (timeout,) = failures(received)
    assert (timeout.source_kind, timeout.failure_category) == ("workflow_run", "timeout")
    # workflow_failed announces timeouts too; the event type tells them apart
    (failed,) = [event for kind, event in received if kind == "WorkflowTimedOut"]
    assert failed.run_id == stub.run_id() and failed.message is not None


def test_terminate_parking_and_structural_limits(inline, received):
    stub = start("tests.cancellable", "fr-4", "timer")
    inline.run()
    stub.terminate("ops")
    parked = start("tests.touches-orm", "fr-5")
    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {"command_batch_size": 2}}):
        limited = start("tests.fanout", "fr-6", 3)
        inline.run()
    by_instance = {event.instance_id: event for event in failures(received)}
    assert by_instance["fr-4"].failure_category == "terminated"
    assert by_instance["fr-5"].source_kind == "workflow_task"
    assert by_instance["fr-5"].run_id == parked.run_id()
    assert by_instance["fr-6"].failure_category == "structural_limit"
    assert by_instance["fr-6"].run_id == limited.run_id()
    assert len(failures(received)) == WorkflowFailure.objects.count() == 3


def test_nothing_is_announced_when_the_transaction_rolls_back(inline, received):
    stub = start("tests.cancellable", "fr-7", "timer")
    inline.run()
    with pytest.raises(RuntimeError), database.atomic():
        stub.terminate("ops")
        raise RuntimeError
    assert received == [] and WorkflowFailure.objects.count() == 0


def test_a_receiver_that_raises_changes_nothing(inline):
    def broken(sender, event, **kwargs):
        raise RuntimeError("the error tracker is down")

    signals.failure_recorded.connect(broken, weak=False, dispatch_uid="test-broken")
    try:
        stub = start("tests.crashes", "fr-8", "boom")
        inline.run()
    finally:
        signals.failure_recorded.disconnect(dispatch_uid="test-broken")
    assert stub.refresh().failed()


def test_every_failure_row_is_written_through_the_announcing_function():
    package = pathlib.Path(executor.__file__).parent.parent
    writers = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "commands.record_failure(" in path.read_text()
    ]
    assert writers == ["executor/lifecycle.py"]
