"""Lifecycle signals fire after commit, with durable identity."""

from __future__ import annotations

import pytest

from durable_workflow import signals
from durable_workflow.store import database
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def received():
    seen = []
    connected = list(signals.SIGNAL_OF_EVENT.values())

    def receiver(sender, event, **kwargs):
        seen.append((event.event_type, sender, event))

    for signal in connected:
        signal.connect(receiver, weak=False, dispatch_uid="test-lifecycle")
    yield seen
    for signal in connected:
        signal.disconnect(dispatch_uid="test-lifecycle")


def test_signals_for_a_run_with_a_retried_activity(inline, received):
    stub = start("tests.retrying", "life-1", 2)
    inline.run()
    kinds = [kind for kind, _, _ in received]
    assert kinds == [
        "WorkflowStarted",
        "ActivityStarted",
        "ActivityStarted",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]
    started = received[1][2]
    assert received[1][1] == "tests.retrying"
    assert started.instance_id == "life-1" and started.run_id == stub.run_id()
    assert started.activity_type == "tests.flaky"
    assert started.activity_class == "tests.testapp.workflows.Flaky"
    assert [e.attempt_number for k, _, e in received if k == "ActivityStarted"] == [1, 2]


def test_failed_and_terminated_runs_are_announced(inline, received):
    start("tests.crashes", "life-2", "boom")
    inline.run()
    failed = [e for k, _, e in received if k == "WorkflowFailed"]
    assert failed[0].exception_class == "builtins.ValueError" and failed[0].message == "boom"
    stub = start("tests.cancellable", "life-3", "timer")
    stub.terminate("ops")
    assert [e.reason for k, _, e in received if k == "WorkflowTerminated"] == ["ops"]


def test_nothing_is_announced_when_the_transaction_rolls_back(inline, received):
    with pytest.raises(RuntimeError), database.atomic():
        start("tests.sequential", "life-4", "ada")
        raise RuntimeError
    assert received == []
