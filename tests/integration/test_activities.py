"""Start → activities → completion, retries, failures, on a real database."""

from __future__ import annotations

import pytest

from durable_workflow import ActivityOptions
from durable_workflow.models import ActivityAttempt, ActivityExecution
from tests.integration.helpers import event_types, events_of, failures, start, tasks_of
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_sequential_activities_complete_with_spec_history(inline):
    stub = start("tests.sequential", "seq-1", "ada")
    assert stub.status() == "pending"
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.closed_reason() == "completed"
    assert stub.output() == ["hello ada", 3]
    assert event_types(stub) == [
        "StartAccepted",
        "WorkflowStarted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]
    sequences = [event.sequence for event in stub.history()]
    assert sequences == list(range(1, len(sequences) + 1))
    assert [e["sequence"] for e in events_of(stub, "ActivityScheduled")] == [1, 2]


def test_activity_and_workflow_know_their_ids(inline):
    stub = start("tests.identity", "ids-1")
    inline.run()
    out = stub.refresh().output()
    assert out["workflow_id"] == "ids-1"
    assert out["run_id"] == stub.run_id()
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert out["activity"] == {
        "workflow_id": "ids-1",
        "run_id": stub.run_id(),
        "activity_id": str(execution.id),
        "attempt_id": str(execution.current_attempt_id),
        "attempt_count": 1,
    }


def test_retry_then_success(inline):
    stub = start("tests.retrying", "retry-1", 3)
    inline.run()
    stub.refresh()
    assert stub.output() == "ok after 3"
    types = event_types(stub)
    assert types.count("ActivityStarted") == 3
    assert types.count("ActivityRetryScheduled") == 2
    assert types.count("ActivityCompleted") == 1
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    attempts = list(ActivityAttempt.objects.filter(execution=execution))
    assert [a.attempt_number for a in attempts] == [1, 2, 3]
    assert [a.status for a in attempts] == ["failed", "failed", "completed"]
    assert len({a.id for a in attempts}) == 3
    # one idempotency key across every attempt
    assert set(Invocation.objects.values_list("key", flat=True)) == {str(execution.id)}
    retry = events_of(stub, "ActivityRetryScheduled")[0]
    assert retry["exception_type"].endswith("PaymentDeclined")
    retry_task = next(t for t in tasks_of(stub, "activity") if t.payload)
    assert set(retry_task.payload) == {
        "retry_of_task_id",
        "retry_after_attempt_id",
        "retry_after_attempt",
        "retry_backoff_seconds",
    }


def test_retry_exhaustion_fails_the_run_with_failure_rows(inline):
    stub = start("tests.retrying", "retry-2", 99)
    inline.run()
    stub.refresh()
    assert stub.status() == "failed"
    assert stub.closed_reason() == "failed"
    assert Invocation.objects.filter(name="flaky").count() == 3  # tries = 3
    failed = events_of(stub, "ActivityFailed")
    assert len(failed) == 1 and failed[0]["non_retryable"] is False
    assert failed[0]["message"] == "attempt 3 declined"
    rows = failures(stub)
    assert [r.failure_category for r in rows] == ["activity", "application"]
    assert rows[0].exception_class == "tests.testapp.workflows.PaymentDeclined"
    assert "PaymentDeclined: attempt 3 declined" in rows[0].traceback
    assert rows[1].exception_class == "tests.testapp.workflows.PaymentDeclined"
    workflow_failed = events_of(stub, "WorkflowFailed")[0]
    assert workflow_failed["failure_id"] == str(rows[1].id)


def test_per_call_max_attempts_overrides_tries(inline):
    stub = start("tests.retrying", "retry-3", 99, 2)
    inline.run()
    assert stub.refresh().status() == "failed"
    assert Invocation.objects.filter(name="flaky").count() == 2


def test_non_retryable_error_stops_retries(inline):
    stub = start("tests.non-retryable", "nonretry-1")
    inline.run()
    stub.refresh()
    assert stub.status() == "failed"
    assert Invocation.objects.filter(name="refuse").count() == 1
    assert "ActivityRetryScheduled" not in event_types(stub)
    failed = events_of(stub, "ActivityFailed")[0]
    assert failed["non_retryable"] is True
    assert failed["exception_type"] == "tests.declined"  # the durable type key
    assert failures(stub)[0].non_retryable is True


def test_non_retryable_error_types_option(inline, monkeypatch):
    from tests.testapp import workflows

    original = workflows.Retrying.handle

    def handle(self, succeed_on, max_attempts=None):
        options = ActivityOptions(non_retryable_error_types=["PaymentDeclined"])
        return workflows.dw.activity(workflows.Flaky, options, succeed_on)

    monkeypatch.setattr(workflows.Retrying, "handle", handle)
    stub = start("tests.retrying", "retry-4", 99)
    inline.run()
    monkeypatch.setattr(workflows.Retrying, "handle", original)
    assert stub.refresh().status() == "failed"
    assert Invocation.objects.filter(name="flaky").count() == 1


def test_activity_failure_is_catchable_as_original_type(inline):
    stub = start("tests.catch-failure", "catch-1")
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == {
        "caught": {
            "type": "PaymentDeclined",
            "message": "attempt 1 declined",
            "is_activity_failed": True,
        },
        "after": 5,
    }
    handled = events_of(stub, "FailureHandled")
    assert len(handled) == 1 and handled[0]["sequence"] == 1


def test_workflow_exception_fails_run_with_traceback(inline):
    stub = start("tests.crashes", "crash-1", "boom")
    inline.run()
    stub.refresh()
    assert stub.status() == "failed"
    row = failures(stub)[0]
    assert row.failure_category == "application"
    assert row.exception_class == "builtins.ValueError"
    assert row.message == "boom"
    assert "raise ValueError(message)" in row.traceback
    assert event_types(stub)[-1] == "WorkflowFailed"


def test_options_snapshot_is_taken_at_schedule_time(inline, monkeypatch):
    from tests.testapp import workflows

    stub = start("tests.retrying", "snap-1", 99)
    # run only the first workflow task, then change the class policy
    from durable_workflow import executor

    executor.run_workflow_task(tasks_of(stub, "workflow")[0].id)
    monkeypatch.setattr(workflows.Flaky, "tries", 10)
    inline.run()
    assert Invocation.objects.filter(name="flaky").count() == 3
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert execution.options["max_attempts"] == 3
    assert execution.options["backoff"] == [0]
