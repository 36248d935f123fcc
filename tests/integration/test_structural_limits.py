"""Structural limits under the spec's wire names; the warning threshold; the intake
limit on updates; history_transaction_size; the poison-activity cap (issue 23)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.conf import settings
from django.test import override_settings

from durable_workflow import ConfigurationError, WorkflowFailedError, clock, executor
from durable_workflow.conf import get_settings
from durable_workflow.executor import activity_task
from durable_workflow.models import HistoryEvent, Task, WorkflowFailure
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def limits(**values):
    return override_settings(
        DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "STRUCTURAL_LIMITS": values}
    )


def test_size_limits_take_the_wire_names_and_still_accept_the_old_ones():
    with limits(payload_size=10, memo_size_bytes=20):
        assert get_settings().limit("payload_size_bytes") == 10
        assert get_settings().limit("payload_size") == 10  # the old name reads the same
        assert get_settings().limit("memo_size_bytes") == 20
        assert get_settings().limit("search_attribute_size_bytes") == 40 * 1024
        assert get_settings().limit_warning_percent() == 80
    for bad in (
        {"payload_size": 1, "payload_size_bytes": 2},  # the same limit twice
        {"warning_threshold_percent": 101},
        {"payload_size_kib": 1},
    ):
        with pytest.raises(ConfigurationError), limits(**bad):
            get_settings()


def test_a_limit_failure_records_the_wire_name(inline):
    with limits(memo_size_bytes=10):
        stub = start("tests.tagged", "limits-memo", "acme", 1)
        inline.run()
    final = stub.refresh().history()[-1].payload
    assert final["structural_limit_kind"] == "memo_size_bytes"
    row = WorkflowFailure.objects.get(run_id=stub.run_id(), source_kind="workflow_run")
    assert row.details["structural_limit_kind"] == "memo_size_bytes"


def test_histories_written_with_the_old_names_still_replay(inline):
    """The kind is a recorded fact: nothing interprets it when answering for the run."""
    with limits(command_batch_size=2):
        stub = start("tests.fanout", "limits-old", 3)
        inline.run()
    final = HistoryEvent.objects.get(run_id=stub.run_id(), event_type="WorkflowFailed")
    HistoryEvent.objects.filter(id=final.id).update(
        payload={**final.payload, "structural_limit_kind": "payload_size"}  # as written before
    )
    with pytest.raises(WorkflowFailedError) as failed:
        stub.refresh().result(timeout=1)
    assert failed.value.exception_type == "durable_workflow.exceptions.StructuralLimitExceeded"
    assert stub.describe().status == "failed"


@pytest.mark.parametrize(("percent", "warned"), [(50, True), (0, False), (80, False)])
def test_the_warning_threshold_is_a_setting(inline, caplog, percent, warned):
    with (
        limits(pending_activity_count=6, warning_threshold_percent=percent),
        caplog.at_level(logging.WARNING, logger="durable_workflow"),
    ):
        stub = start("tests.fanout", f"limits-warn-{percent}", 4)  # 4 of 6: 66 %
        inline.run()
    assert stub.refresh().output() == [0, 1, 2, 3]
    near = [r for r in caplog.records if "approaching structural limit" in r.getMessage()]
    assert bool(near) is warned
    if warned:
        record = near[0]
        assert (record.limit_kind, record.current, record.limit) == ("pending_activity_count", 4, 6)
        assert record.utilization_percent == 66
        assert record.workflow_run_id == stub.run_id()


def test_the_pending_update_limit_rejects_and_the_run_stays_open(inline, caplog):
    stub = start("tests.approval", "limits-updates", "updates")
    inline.run()
    with limits(pending_update_count=2), caplog.at_level(logging.WARNING, "durable_workflow"):
        first = stub.submit_update("add-item", "a")
        second = stub.submit_update("add-item", "b")
        refused = stub.attempt_update("add-item", "c")
    assert first.accepted and second.accepted
    assert (refused.outcome, refused.rejection_reason) == (
        "structural_limit_exceeded",
        "structural_limit_exceeded",
    )
    assert refused.metadata == {
        "structural_limit_kind": "pending_update_count",
        "structural_limit_value": 3,
        "structural_limit_configured": 2,
    }
    assert any("pending_update_count" in r.getMessage() for r in caplog.records)
    assert stub.refresh().running()
    inline.run()  # the two accepted updates are applied; the run takes updates again
    with limits(pending_update_count=2):
        assert stub.submit_update("add-item", "c").accepted
    inline.run()
    assert stub.query("snapshot")["items"] == ["a", "b", "c"]


def test_history_transaction_size_fails_the_run_and_writes_nothing_of_the_task(inline):
    with limits(history_transaction_size=5, pending_activity_count=0, command_batch_size=0):
        stub = start("tests.fanout", "limits-history", 6)  # six ActivityScheduled events
        inline.run()
    stub.refresh()
    assert stub.failed()
    final = stub.history()[-1].payload
    assert final["structural_limit_kind"] == "history_transaction_size"
    assert final["structural_limit_configured"] == 5
    assert "ActivityScheduled" not in event_types(stub)


def test_an_activity_that_keeps_killing_its_worker_fails_after_the_cap(inline):
    """ACTIVITY_MAX_LEASE_EXPIRIES: each attempt claims the task and its worker dies (the
    lease runs out); after the cap the repair pass fails the activity for good."""
    lease = get_settings().ACTIVITY_LEASE_SECONDS
    dw = {**settings.DURABLE_WORKFLOW, "ACTIVITY_MAX_LEASE_EXPIRIES": 2}
    with override_settings(DURABLE_WORKFLOW=dw):
        stub = start("tests.sequential", "limits-poison", "ada")
        executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
        task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
        for death in range(3):
            assert activity_task._claim(task.id) is not None, death  # then the worker dies
            clock.advance(dt.timedelta(seconds=lease + 1))
            assert executor.repair_pass().reclaimed == 1
        task.refresh_from_db()
        assert task.status == "failed"
        inline.run()
    (failed,) = events_of(stub, "ActivityFailed")
    assert failed["exception_type"] == "ActivityLeaseExpired"
    assert failed["failure_category"] == "timeout" and failed["non_retryable"]
    assert "3 times" in failed["message"]
    assert stub.refresh().failed()
