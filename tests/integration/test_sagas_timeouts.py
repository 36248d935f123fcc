"""Sagas, workflow and activity timeouts, heartbeat progress."""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import StartOptions, WorkflowStub, clock, executor
from durable_workflow.executor import activity_task, settlement
from durable_workflow.executor.heartbeat import HeartbeatProgressError, check_progress
from durable_workflow.models import ActivityExecution, Task, WorkflowFailure
from tests.integration.helpers import event_types, events_of, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def greetings(stub):
    return [
        e.payload["activity_type"] + ":" + str(e.payload.get("sequence"))
        for e in stub.history()
        if e.event_type == "ActivityScheduled"
    ]


def test_compensations_run_newest_first(inline):
    stub = start("tests.booking", "saga-1", 4)
    inline.run()
    assert stub.refresh().output() == "compensated"
    names = list(
        Invocation.objects.filter(name="greet").order_by("id").values_list("key", flat=True)
    )
    assert len(names) == 6
    undo = [
        e.payload
        for e in stub.history()
        if e.event_type == "ActivityScheduled" and e.payload["sequence"] > 4
    ]
    assert len(undo) == 3
    # the arguments decide the order: undo-3, undo-2, undo-1
    from durable_workflow.codec import envelope

    executions = ActivityExecution.objects.filter(run_id=stub.run_id(), sequence__gt=4).order_by(
        "sequence"
    )
    assert [envelope.decode(e.arguments)[0] for e in executions] == ["undo-3", "undo-2", "undo-1"]


def test_a_failing_compensation_stops_the_rest_by_default(inline):
    stub = start("tests.booking", "saga-2", 5)
    inline.run()
    stub.refresh()
    assert stub.failed()
    assert Invocation.objects.filter(name="refuse").count() == 1
    assert Invocation.objects.filter(name="greet").count() == 3  # bookings only, no undo


def test_continue_with_error_runs_every_compensation(inline):
    stub = start("tests.booking", "saga-3", 5, False, True)
    inline.run()
    assert stub.refresh().output() == "compensated"
    assert Invocation.objects.filter(name="greet").count() == 6


def test_parallel_compensation_is_one_group(inline):
    stub = start("tests.booking", "saga-4", 4, True)
    inline.run()
    assert stub.refresh().output() == "compensated"
    groups = {
        e.payload.get("parallel_group_id")
        for e in stub.history()
        if e.event_type == "ActivityScheduled" and e.payload["sequence"] > 4
    }
    assert groups == {"parallel-calls:5:3"}


def test_parallel_continue_with_error_waits_for_every_compensation(inline):
    """Issue 23, item 4: compensate() returned at the first failure, leaving the slower
    compensations to be cancelled when the body finished."""
    stub = start("tests.clean-up-everything", "saga-6")
    inline.run()
    assert stub.refresh().running()  # the failure came first; compensate() still waits
    assert Invocation.objects.filter(name="refuse").count() == 1  # non-retryable: failed
    clock.advance(dt.timedelta(seconds=61))
    inline.run()
    assert stub.refresh().status() == "completed"
    assert stub.output()["failed"] == ["tests.declined"]
    assert Invocation.objects.filter(name="greet").count() == 2  # both clean-ups ran
    assert "ActivityCancelled" not in [e.event_type for e in stub.history()]


def test_sequential_continue_with_error_returns_the_failures(inline):
    stub = start("tests.booking", "saga-7", 5, False, True)
    inline.run()
    assert stub.refresh().output() == "compensated"
    assert events_of(stub, "FailureHandled")  # the failure was caught by compensate()


def test_no_failure_no_compensation(inline):
    stub = start("tests.booking", "saga-5", 0)
    inline.run()
    assert stub.refresh().output() == "booked"
    assert Invocation.objects.filter(name="greet").count() == 3


@pytest.mark.parametrize("kind", ["execution", "run"])
def test_workflow_timeout_while_waiting_on_a_timer(inline, kind):
    options = (
        StartOptions(execution_timeout_seconds=60)
        if kind == "execution"
        else StartOptions(run_timeout_seconds=60)
    )
    stub = WorkflowStub.make("tests.sleeper", f"wf-timeout-{kind}")
    stub.start(3600, options=options)
    inline.run()
    clock.advance(dt.timedelta(seconds=61))
    report = executor.repair_pass()  # the watchdog: no task is pending for this run
    assert report.timed_out == 1
    assert executor.repair_pass().timed_out == 0  # idempotent
    stub.refresh()
    assert (stub.status(), stub.closed_reason()) == ("failed", "timed_out")
    final = events_of(stub, "WorkflowTimedOut")[0]
    assert final["timeout_kind"] == f"{kind}_timeout"
    assert event_types(stub)[-2:] == ["TimerCancelled", "WorkflowTimedOut"]
    failure = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert failure.failure_category == "timeout"


def test_workflow_deadline_checked_at_task_start(inline):
    stub = WorkflowStub.make("tests.sequential", "wf-timeout-task")
    stub.start("ada", options=StartOptions(execution_timeout_seconds=5))
    clock.advance(dt.timedelta(seconds=6))
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow")
    assert executor.run_workflow_task(task.id) == "timed_out"
    assert stub.refresh().closed_reason() == "timed_out"


def test_schedule_to_start_timeout_retries_then_fails(inline):
    stub = start("tests.timeouts", "act-sts", "schedule_to_start")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    clock.advance(dt.timedelta(seconds=6))
    assert executor.repair_pass().timed_out == 1  # attempt budget 2: a retry
    assert "ActivityRetryScheduled" in event_types(stub)
    clock.advance(dt.timedelta(seconds=6))
    assert executor.repair_pass().timed_out == 1  # the retry timed out as well: final
    inline.run()
    assert stub.refresh().output() == {"timed_out": "schedule_to_start"}
    timed_out = events_of(stub, "ActivityTimedOut")
    assert len(timed_out) == 1 and timed_out[0]["timeout_kind"] == "schedule_to_start"


def test_start_to_close_timeout_fences_the_slow_attempt(inline):
    stub = start("tests.timeouts", "act-stc", "start_to_close")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    slow = activity_task._claim(task.id)
    clock.advance(dt.timedelta(seconds=6))
    assert executor.repair_pass().timed_out == 1
    assert settlement.settle(slow, *activity_task._invoke(slow)) == "stale"
    inline.run()  # the retry runs and completes
    assert stub.refresh().output() == 2


def test_schedule_to_close_is_final_even_with_attempts_left(inline):
    stub = start("tests.timeouts", "act-stclose", "schedule_to_close")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    clock.advance(dt.timedelta(seconds=6))
    assert executor.repair_pass().timed_out == 1
    inline.run()
    assert stub.refresh().output() == {"timed_out": "schedule_to_close"}


def test_heartbeat_timeout(inline):
    stub = start("tests.timeouts", "act-hb", "heartbeat")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
    lease = activity_task._claim(task.id)
    clock.advance(dt.timedelta(seconds=3))
    from durable_workflow.executor.heartbeat import heartbeat

    assert heartbeat(lease, {"message": "alive", "current": 1.0, "total": 4}) is True
    clock.advance(dt.timedelta(seconds=3))
    assert executor.repair_pass().timed_out == 0  # the heartbeat moved the deadline
    clock.advance(dt.timedelta(seconds=3))
    assert executor.repair_pass().timed_out == 1
    inline.run()
    assert stub.refresh().output() == {"timed_out": "heartbeat"}
    beat = events_of(stub, "ActivityHeartbeatRecorded")[0]
    assert beat["progress"] == {"message": "alive", "current": 1, "total": 4}
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert execution.last_heartbeat_progress == beat["progress"]


@pytest.mark.parametrize(
    "bad",
    [
        {"nope": 1},
        {"message": ""},
        {"message": "x" * 281},
        {"unit": "items"},
        {"current": -1},
        {"total": float("nan")},
        {"details": {f"k{i}": i for i in range(21)}},
        {"details": {"bad key": 1}},
        {"details": {"k": [1]}},
        {"details": {"k": ""}},
        {"details": {"k": "x" * 192}},
        "not a dict",
    ],
)
def test_heartbeat_progress_validation(bad):
    with pytest.raises(HeartbeatProgressError):
        check_progress(bad)


def test_heartbeat_progress_normalisation():
    assert check_progress({}) is None
    assert check_progress({"current": 2.0, "total": 10, "unit": "rows"}) == {
        "current": 2,
        "total": 10,
        "unit": "rows",
    }
    assert list(check_progress({"details": {"b": 1, "a": "x"}})["details"]) == ["a", "b"]
