"""Local activities: in-process execution, durable retries, crash recovery, no open transaction."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import (
    ActivityOptions,
    ConfigurationError,
    LocalActivityOptions,
    clock,
    executor,
)
from durable_workflow.executor import workflow_task
from durable_workflow.models import ActivityAttempt, ActivityExecution, Task
from tests.integration.helpers import event_types, events_of, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_local_steps_run_inside_the_workflow_task(inline):
    stub = start("tests.local-steps", "local-1", 5)
    inline.run()
    assert stub.refresh().output() == sum(range(5))
    assert not Task.objects.filter(run_id=stub.run_id(), task_type="activity").exists()
    assert Task.objects.filter(run_id=stub.run_id(), task_type="workflow").count() == 1
    for kind in ("ActivityScheduled", "ActivityStarted", "ActivityCompleted"):
        for payload in events_of(stub, kind):
            if kind != "ActivityScheduled":
                assert payload["execution_mode"] == "local" and payload["local_activity"] is True
    execution = ActivityExecution.objects.filter(run_id=stub.run_id()).first()
    assert execution.options["execution_mode"] == "local"
    assert Invocation.objects.filter(name="add").count() == 5


def test_replay_does_not_rerun_completed_local_activities(inline):
    stub = start("tests.local-steps", "local-2", 3)
    inline.run()
    from durable_workflow.codec import envelope
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history
    from tests.testapp.composition import LocalSteps

    runtime = WorkflowRuntime(
        factory=lambda: LocalSteps._dw_instantiate(runtime), workflow_id="x", run_id=stub.run_id()
    )
    runtime.feed(history.load_history(stub.run_id()))
    assert envelope.decode(runtime.closed.result) == 3
    assert runtime.local_requests == []
    assert Invocation.objects.filter(name="add").count() == 3


def test_retry_is_a_delayed_workflow_task(inline):
    stub = start("tests.local-steps", "local-3", 0, "retry")
    inline.run()
    assert stub.refresh().status() == "waiting"
    assert Invocation.objects.filter(name="flaky").count() == 1  # no in-process retry loop
    retry = events_of(stub, "ActivityRetryScheduled")[0]
    assert retry["retry_backoff_seconds"] == 5 and retry["retry_reason"] == "failure"
    clock.advance(dt.timedelta(seconds=6))
    inline.run()
    assert stub.refresh().output() == "ok after 2"
    attempts = list(
        ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).order_by("attempt_number")
    )
    assert [(a.attempt_number, a.status, a.retry_reason) for a in attempts] == [
        (1, "failed", None),
        (2, "completed", "failure"),
    ]


def test_a_crash_after_start_retries_with_cold_replay(inline):
    stub = start("tests.local-steps", "local-4", 0, "sleepy")
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow")
    pending = workflow_task._start(task.id)  # ActivityStarted is committed; then "the worker dies"
    assert isinstance(pending, workflow_task._Pending)
    pending.runtime.dispose()
    assert event_types(stub)[-1] == "ActivityStarted"
    clock.advance(dt.timedelta(seconds=301))  # the workflow task's lease runs out
    assert executor.repair_pass().reclaimed == 1
    inline.run()
    assert stub.refresh().output() == "woke on attempt 1"  # the crashed attempt never ran it
    attempts = list(
        ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).order_by("attempt_number")
    )
    assert [a.retry_reason for a in attempts] == [None, "cold_replay"]


def test_mixed_queued_and_local(inline):
    stub = start("tests.local-steps", "local-5", 0, "mixed")
    inline.run()
    assert stub.refresh().output() == [2, 3]


def test_no_transaction_is_open_while_a_local_activity_runs(inline, monkeypatch):
    from django.db import connection

    from durable_workflow.executor import local_activities

    seen = []
    original = local_activities.run_attempt

    def spy(lease):
        seen.append(connection.in_atomic_block)
        return original(lease)

    monkeypatch.setattr(local_activities, "run_attempt", spy)
    stub = start("tests.local-steps", "local-6", 2)
    inline.run()
    assert stub.refresh().output() == 1
    assert seen == [False, False]


def test_local_options_reject_routing():
    with pytest.raises(ConfigurationError, match="Local activities do not accept"):
        LocalActivityOptions.from_activity_options(ActivityOptions(queue="x"))
    with pytest.raises(ConfigurationError):
        LocalActivityOptions.from_activity_options(ActivityOptions(schedule_to_start_timeout=5))


def test_a_local_attempt_whose_lease_was_lost_records_nothing(inline):
    stub = start("tests.local-steps", "local-lost", 2)
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    pending = workflow_task._start(task.id)  # the first attempt is started, then "hangs"
    assert isinstance(pending, workflow_task._Pending)
    Task.objects.filter(id=task.id).update(lease_generation=99)  # someone else took it over
    ok, value = executor.local_activities.run_attempt(pending.lease)
    assert workflow_task._resume(pending, ok, value) == "stale"
    assert "ActivityCompleted" not in event_types(stub)


def test_a_workflow_task_waits_while_a_local_activity_of_its_run_is_running(inline):
    from django.db import transaction

    from durable_workflow.executor.common import workflow_task_row
    from durable_workflow.store import runs, tasks

    stub = start("tests.local-steps", "local-busy", 2)
    first = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    pending = workflow_task._start(first.id)  # paused: its local activity would run now
    assert not isinstance(pending, str)
    run = runs.get_run(stub.run_id())
    with transaction.atomic():  # e.g. a signal's wake arrives meanwhile
        (other,) = tasks.save_tasks([workflow_task_row(run, now=clock.now())])
    assert executor.run_workflow_task(other.id) == "busy"
    other_row = Task.objects.get(id=other.id)
    assert other_row.status == "ready" and other_row.lease_owner is None
    assert other_row.available_at > clock.now()  # tried again a second later
    assert Task.objects.get(id=first.id).status == "leased"  # the paused task is untouched
    assert workflow_task.finish_pending(pending) == "completed"
    clock.freeze(clock.now() + dt.timedelta(seconds=2))
    inline.run()
    assert stub.refresh().status() == "completed" and stub.output() == 1
