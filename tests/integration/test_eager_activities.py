"""Eager activities: a workflow task runs the one activity it schedules in its own process.

Each test drives a process with a dispatch backend that only records messages,
so anything not run in place shows up as a published message.
"""

from __future__ import annotations

import datetime as dt
import itertools
import types
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

import durable_workflow as dw
from durable_workflow import Activity, ActivityOptions, Workflow, clock, executor
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.executor import dispatch, fan_out, sticky, workflow_task
from durable_workflow.executor.identity import worker_id
from durable_workflow.models import ActivityAttempt, Task, Timer
from durable_workflow.store import sql
from durable_workflow.store import tasks as tasks_store
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import Recorder, event_types, events_of, start, tasks_of
from tests.testapp.workflows import Add, Greet

pytestmark = pytest.mark.django_db(transaction=True)


class OtherQueue(Workflow):
    type_key = "tests.eager.other-queue"

    def handle(self) -> int:
        return dw.activity(Add, ActivityOptions(queue="elsewhere"), 1, 2)


class Unknown(Workflow):
    type_key = "tests.eager.unknown"

    def handle(self) -> Any:
        return dw.activity("tests.eager.not-registered-here", 1)


class MixedQueues(Workflow):
    type_key = "tests.eager.mixed-queues"

    def handle(self) -> Any:
        return dw.all(
            [
                lambda: dw.activity(Add, 1, 2),
                lambda: dw.activity(Add, ActivityOptions(queue="elsewhere"), 3, 4),
                lambda: dw.activity(Add, 5, 6),
            ]
        )


class Nap(Activity):
    """Slow only by the test's threshold (``slow_members``): no sleep, no timing."""

    type_key = "tests.eager.nap"

    def handle(self, index: int) -> int:
        return index


class SlowFanOut(Workflow):
    type_key = "tests.eager.slow-fan-out"

    def handle(self, count: int) -> Any:
        return dw.all([lambda index=index: dw.activity(Nap, index) for index in range(count)])


class StepThenLarge(Workflow):
    type_key = "tests.eager.step-then-large"

    def handle(self, size: int) -> Any:
        dw.activity(Add, 1, 2)
        return dw.activity(Greet, "x" * size)  # past the payload limit: met as it persists


class TimerLeftOpen(Workflow):
    type_key = "tests.eager.timer-left-open"

    def handle(self) -> Any:
        selected = dw.select(
            {"work": lambda: dw.activity(Add, 1, 2), "later": lambda: dw.timer(3600)}
        )
        return selected.result()  # the timer is left pending: closing cancels it


class PokeOwnWorkflow(Activity):
    """Signals the workflow it runs for: a write to the run between two steps."""

    type_key = "tests.eager.poke-own-workflow"

    def handle(self, value: int) -> int:
        dw.WorkflowStub.load(self.workflow_id()).signal("poke", value)
        return value


class CancelOwnWorkflow(Activity):
    type_key = "tests.eager.cancel-own-workflow"

    def handle(self) -> str:
        dw.WorkflowStub.load(self.workflow_id()).cancel("from inside")
        return "asked"


class CancelledBetweenSteps(Workflow):
    type_key = "tests.eager.cancelled-between-steps"

    def handle(self) -> Any:
        dw.activity(Add, 1, 2)
        dw.activity(CancelOwnWorkflow)
        return dw.activity(Add, 3, 4)


class PokedBetweenSteps(Workflow):
    type_key = "tests.eager.poked-between-steps"
    signals = ["poke"]

    def handle(self) -> Any:
        first = dw.activity(Add, 1, 2)
        dw.activity(PokeOwnWorkflow, 7)
        poked = dw.wait_signal("poke")
        return [first, poked, dw.activity(Add, poked, 1)]


def eager_settings(**more: Any) -> dict[str, Any]:
    return {
        **settings.DURABLE_WORKFLOW,
        "EAGER_ACTIVITIES": True,
        "EAGER_WORKFLOW_TASKS": True,
        **more,
    }


#: A threshold no member's run reaches, or that every member's run reaches: whether a
#: fan-out member counts as quick is decided by the test, never by the machine's speed.
EVERY_MEMBER_QUICK = 3600.0
NO_MEMBER_QUICK = 0.0


@pytest.fixture
def recorder(monkeypatch):
    monkeypatch.setattr(fan_out, "QUICK_SECONDS", EVERY_MEMBER_QUICK)
    sticky.cache.clear()
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    with override_settings(DURABLE_WORKFLOW=eager_settings()):
        yield backend
    dispatch.set_backend(previous)
    sticky.cache.clear()


def first_task(stub: dw.WorkflowStub) -> Task:
    return Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")


def sent(backend: Recorder, task_type: str) -> int:
    return sum(1 for kind, _, _ in backend.sent if kind == task_type)


def run_ready(stub: dw.WorkflowStub, *, rounds: int = 10) -> list[str]:
    """Run the run's ready tasks one message at a time, as workers would; the outcomes."""
    outcomes = []
    for _ in range(rounds):
        ready = Task.objects.filter(run_id=stub.run_id(), status="ready").first()
        if ready is None:
            break
        runner = (
            executor.run_workflow_task
            if ready.task_type == "workflow"
            else executor.run_activity_task
        )
        outcomes.append(runner(ready.id))
    return outcomes


def test_a_sequential_workflow_runs_to_the_end_in_one_message(recorder):
    stub = start("tests.many-steps", "eager-1", 5)
    before = len(recorder.sent)
    assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().status() == "completed" and stub.output() == 10
    assert len(recorder.sent) == before  # nothing published: every step ran here
    steps = [t for t in event_types(stub) if t.startswith("Activity")]
    assert steps == ["ActivityScheduled", "ActivityStarted", "ActivityCompleted"] * 5
    started = events_of(stub, "ActivityStarted")
    assert {event["lease_owner"] for event in started} == {worker_id()}
    assert {t.status for t in tasks_of(stub)} == {"completed"}
    assert ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).count() == 5
    # Each result and the workflow's next step were recorded by one transaction.
    history = stub.history()
    for event, following in itertools.pairwise(history):
        if event.event_type == "ActivityCompleted":
            assert following.recorded_at == event.recorded_at
    workflow_tasks = tasks_of(stub, "workflow")
    assert len(workflow_tasks) == 6 and {t.lease_owner for t in workflow_tasks} == {worker_id()}


def test_the_schedule_and_the_start_commit_together(recorder):
    stub = start("tests.many-steps", "eager-2", 1)
    workflow_task.run_once(first_task(stub).id)  # the process "dies" before the follow-up
    assert event_types(stub)[-2:] == ["ActivityScheduled", "ActivityStarted"]
    activity = tasks_of(stub, "activity")[0]
    assert activity.status == "leased" and sent(recorder, "activity") == 0

    # Nothing runs it until its lease expires; then it goes out again like any lost attempt.
    clock.freeze()
    assert executor.repair_pass().reclaimed == 0
    clock.advance(dt.timedelta(seconds=settings.DURABLE_WORKFLOW["ACTIVITY_LEASE_SECONDS"] + 1))
    assert executor.repair_pass().reclaimed == 1
    assert sent(recorder, "activity") == 1
    published = sent(recorder, "workflow")
    assert executor.run_activity_task(activity.id) == "completed"
    # A result after a lost attempt does not go on in place (the lost one may have died
    # there): the workflow task is published, its first attempt counted before it runs.
    assert stub.refresh().status() == "pending" and sent(recorder, "workflow") == published + 1
    woken = [t for t in tasks_of(stub, "workflow") if t.status == "ready"]
    assert len(woken) == 1 and woken[0].payload == {"count_first": True}
    assert executor.run_workflow_task(woken[0].id) == "completed"
    assert stub.refresh().status() == "completed"
    assert Task.objects.get(id=woken[0].id).attempt_count == 1
    assert event_types(stub).count("ActivityStarted") == 2


def test_the_chain_limit_hands_the_rest_to_the_broker(recorder):
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_CHAIN_LIMIT=3)):
        stub = start("tests.many-steps", "eager-3", 5)
        executor.run_workflow_task(first_task(stub).id)
        assert stub.refresh().status() == "pending"  # a workflow task is due
        # Three follow-ups ran (three activities, each settled with the workflow's next
        # step); the third result's workflow task was published.
        assert event_types(stub).count("ActivityCompleted") == 3
        published = [t for t in tasks_of(stub) if t.status == "ready"]
        assert len(published) == 1 and sent(recorder, published[0].task_type) >= 1
        run_ready(stub)
    assert stub.refresh().output() == 10


def test_a_workflow_task_that_cannot_continue_in_place_is_published(recorder, monkeypatch, caplog):
    calls = []
    real = workflow_task._advance_and_settle

    def broken_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the first in-place continuation
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(workflow_task, "_advance_and_settle", broken_once)
    stub = start("tests.many-steps", "eager-fallback", 3)
    executor.run_workflow_task(first_task(stub).id)
    assert stub.refresh().status() == "completed" and stub.output() == 3
    sequences = [event.sequence for event in stub.history()]
    assert sequences == list(range(1, len(sequences) + 1))
    assert event_types(stub).count("ActivityCompleted") == 3
    assert "could not continue in place" in caplog.text  # the fallback, not the normal path


@pytest.mark.parametrize(
    ("workflow", "why"),
    [("tests.eager.other-queue", "another-queue"), ("tests.eager.unknown", "unknown-here")],
)
def test_activities_this_process_should_not_run_are_published(recorder, workflow, why):
    stub = start(workflow, f"eager-5-{why}")
    executor.run_workflow_task(first_task(stub).id)
    assert sent(recorder, "activity") == 1, why
    assert tasks_of(stub, "activity")[0].status == "ready"
    assert "ActivityStarted" not in event_types(stub)


def test_switched_off_it_publishes_every_activity(recorder):
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_ACTIVITIES=False)):
        stub = start("tests.many-steps", "eager-6", 2)
        executor.run_workflow_task(first_task(stub).id)
        assert sent(recorder, "activity") == 1
        assert tasks_of(stub, "activity")[0].status == "ready"


def test_a_failed_eager_attempt_retries_through_the_broker(recorder):
    stub = start("tests.retrying", "eager-7", 2)
    executor.run_workflow_task(first_task(stub).id)
    assert event_types(stub).count("ActivityRetryScheduled") == 1
    assert sent(recorder, "activity") == 1  # the retry, published with its back-off
    retry = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    assert executor.run_activity_task(retry.id) == "completed"
    assert stub.refresh().status() == "completed" and stub.output() == "ok after 2"


def test_an_eager_step_costs_one_transaction(recorder, monkeypatch):
    commits = []
    real_commit = connection.commit
    monkeypatch.setattr(connection, "commit", lambda: commits.append(1) or real_commit())
    stub = start("tests.many-steps", "eager-8", 40)
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_CHAIN_LIMIT=7)):
        executor.run_workflow_task(first_task(stub).id)  # warm the body and the caches
        counts = []
        for _ in range(2):
            ready = Task.objects.get(run_id=stub.run_id(), status="ready")
            before = event_types(stub).count("ActivityCompleted")
            commits.clear()
            with CaptureQueriesContext(connection) as queries:
                executor.run_workflow_task(ready.id)
            steps = event_types(stub).count("ActivityCompleted") - before
            counts.append((len(queries.captured_queries), len(commits), steps))
            # (A read can carry the writes deferred before it: one statement each.)
            parts = [k for q in queries.captured_queries for k in sql_text.kinds(q["sql"] or "")]
            reads = [k for k in parts if k == ("SELECT", "durable_workflow_history_event")]
            # Only the message's first workflow task reads history back (the result it
            # follows was recorded by another transaction); every step after it feeds
            # the warm body the events its own transactions wrote.
            assert len(reads) == 1
    # One message: a workflow task and seven activities, each settled in the transaction
    # that also runs the workflow's next step; the same statements each time.
    assert counts[0] == counts[1]
    statements, transactions, steps = counts[0]
    assert steps == 7 and transactions == steps + 1
    # On PostgreSQL the writes nobody reads back share a round trip (store.sql.batched).
    limit = 16 if connection.vendor == "postgresql" else 25
    assert statements <= limit * steps, statements / steps


def test_a_warm_body_is_fed_from_memory_only_without_gaps():
    def event(sequence: int) -> HistoryEvent:
        return HistoryEvent(sequence=sequence, event_type="X", payload={}, recorded_at=None)

    runtime = types.SimpleNamespace(last_sequence=5, unfed=[event(6), event(7)])
    run = types.SimpleNamespace(next_sequence=10, appended=[event(9)])
    assert workflow_task._known_tail(run, runtime) is None  # 8 was written elsewhere
    run.appended = [event(8), event(9)]
    assert [e.sequence for e in workflow_task._known_tail(run, runtime)] == [6, 7, 8, 9]
    run.next_sequence = 11  # someone else wrote 10
    assert workflow_task._known_tail(run, runtime) is None


def test_a_fan_out_member_hands_its_process_the_next_sibling(recorder):
    stub = start("tests.fanout", "eager-fan", 6)
    executor.run_workflow_task(first_task(stub).id)
    # The workflow task ran the first member; each result leased the next ready one to
    # this process in the transaction that recorded it.
    assert event_types(stub).count("ActivityCompleted") == 6
    started = events_of(stub, "ActivityStarted")
    assert len(started) == 6 and {event["lease_owner"] for event in started} == {worker_id()}
    # All but the first were published with the fan-out, for any worker to take;
    # delivered now, they find the tasks taken and do nothing.
    activities = tasks_of(stub, "activity")
    assert sent(recorder, "activity") == 5
    assert [executor.run_activity_task(task.id) for task in activities] == ["skipped"] * 6
    assert event_types(stub).count("ActivityStarted") == 6
    # The first result woke the workflow; the others found that task still waiting.
    assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().status() == "completed" and stub.output() == list(range(6))


def test_a_fan_out_member_takes_no_sibling_past_the_chain_limit(recorder):
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_CHAIN_LIMIT=3)):
        stub = start("tests.fanout", "eager-fan-limit", 6)
        executor.run_workflow_task(first_task(stub).id)
        ready = Task.objects.filter(run_id=stub.run_id(), task_type="activity", status="ready")
        assert ready.count() == 3  # three ran in the message; the rest wait for theirs
        # The next message runs its task, and that one's result takes the other two.
        outcomes = [executor.run_activity_task(task.id) for task in list(ready)]
        assert outcomes == ["completed", "skipped", "skipped"]
        assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().status() == "completed" and stub.output() == list(range(6))


def test_a_sibling_on_another_queue_is_left_to_its_workers(recorder):
    stub = start("tests.eager.mixed-queues", "eager-fan-queues")
    executor.run_workflow_task(first_task(stub).id)
    elsewhere = Task.objects.get(run_id=stub.run_id(), task_type="activity", queue="elsewhere")
    assert elsewhere.status == "ready"
    assert executor.run_activity_task(elsewhere.id) == "completed"
    for task in Task.objects.filter(run_id=stub.run_id(), status="ready", task_type="workflow"):
        executor.run_workflow_task(task.id)
    assert stub.refresh().status() == "completed" and stub.output() == [3, 7, 11]


def _commits_while(monkeypatch, action) -> int:
    commits = []
    real_commit = connection.commit
    monkeypatch.setattr(connection, "commit", lambda: commits.append(1) or real_commit())
    action()
    return len(commits)


@pytest.mark.parametrize(("batch", "expected"), [(8, 4), (1, 17)])
def test_quick_fan_out_members_are_taken_and_settled_together(
    recorder, monkeypatch, batch, expected
):
    with override_settings(DURABLE_WORKFLOW=eager_settings(EAGER_SIBLING_BATCH=batch)):
        stub = start("tests.fanout", f"eager-fan-batch-{batch}", 16)
        task = first_task(stub)
        commits = _commits_while(monkeypatch, lambda: executor.run_workflow_task(task.id))
    assert event_types(stub).count("ActivityCompleted") == 16
    # Batch 8: the workflow task, the first member's result (it takes eight), those
    # eight results (they take the last seven), and theirs. One by one: one per member.
    assert commits == expected
    started = events_of(stub, "ActivityStarted")
    assert {event["lease_owner"] for event in started} == {worker_id()}
    assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().status() == "completed" and stub.output() == list(range(16))


def test_slow_fan_out_members_are_taken_one_at_a_time(recorder, monkeypatch):
    monkeypatch.setattr(fan_out, "QUICK_SECONDS", NO_MEMBER_QUICK)
    stub = start("tests.eager.slow-fan-out", "eager-fan-slow", 4)
    executor.run_workflow_task(first_task(stub).id)
    kinds = [kind for kind in event_types(stub) if kind in ("ActivityStarted", "ActivityCompleted")]
    # Each result's transaction starts the next member: never two running at once here.
    assert kinds == ["ActivityStarted", "ActivityCompleted"] * 4
    assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().output() == [0, 1, 2, 3]


def test_a_member_failing_among_quick_ones_fails_the_fan_out(recorder):
    stub = start("tests.fanout", "eager-fan-fail", 12, 6)
    executor.run_workflow_task(first_task(stub).id)
    while Task.objects.filter(run_id=stub.run_id(), status="ready").exists():
        for task in Task.objects.filter(run_id=stub.run_id(), status="ready"):
            if task.task_type == "workflow":
                executor.run_workflow_task(task.id)
            else:
                executor.run_activity_task(task.id)
    assert stub.refresh().status() == "failed"
    assert event_types(stub).count("ActivityFailed") == 1
    assert not Task.objects.filter(run_id=stub.run_id(), status__in=["ready", "leased"]).exists()


def test_a_workflow_task_run_in_place_is_inserted_settled(recorder):
    stub = start("tests.many-steps", "eager-settled", 3)
    updates = []

    def watch(execute, statement, params, many, context):
        updates.extend(k for k in sql_text.kinds(statement) if k == ("UPDATE", Task._meta.db_table))
        return execute(statement, params, many, context)

    with connection.execute_wrapper(watch):
        executor.run_workflow_task(first_task(stub).id)
    assert stub.refresh().output() == 3
    rows = Task.objects.filter(run_id=stub.run_id(), task_type="workflow")
    assert rows.count() == 4 and {row.status for row in rows} == {"completed"}
    assert all(row.lease_expires_at is None for row in rows)
    # The first task's claim and settle, each activity's settle, and the sweep of open
    # tasks as the run closes: the three workflow tasks run in place are written once
    # each, by their insert.
    assert len(updates) == 2 + 3 + 1


def test_an_activity_started_where_it_is_scheduled_is_inserted_running(recorder):
    from durable_workflow.models import ActivityAttempt, ActivityExecution

    stub = start("tests.many-steps", "eager-running", 3)
    updates = []

    def watch(execute, statement, params, many, context):
        table = ActivityExecution._meta.db_table
        updates.extend(k for k in sql_text.kinds(statement) if k == ("UPDATE", table))
        return execute(statement, params, many, context)

    with connection.execute_wrapper(watch):
        executor.run_workflow_task(first_task(stub).id)
    assert stub.refresh().output() == 3
    for execution in ActivityExecution.objects.filter(run_id=stub.run_id()):
        (attempt,) = ActivityAttempt.objects.filter(execution=execution)
        assert execution.current_attempt_id == attempt.id and execution.attempt_count == 1
        assert execution.started_at == attempt.started_at is not None
        assert execution.schedule_to_start_deadline_at is None
        assert execution.result is None  # its ActivityCompleted event holds it
        assert (execution.status, attempt.status, attempt.attempt_number) == (
            "completed",
            "completed",
            1,
        )
    assert len(updates) == 3  # each closed once; none updated to running


def test_a_limit_met_in_place_is_recorded_by_a_regular_workflow_task(recorder, caplog):
    limits = {"STRUCTURAL_LIMITS": {"payload_size_bytes": 2000}}
    with override_settings(DURABLE_WORKFLOW=eager_settings(**limits)):
        stub = start("tests.eager.step-then-large", "eager-limit", 5000)
        caplog.set_level("INFO", logger="durable_workflow")
        # The step, then the large argument: met in place, it goes to a regular task
        # (run by this message too), which fails the run.
        executor.run_workflow_task(first_task(stub).id)
    assert "goes to a regular task" in caplog.text
    assert stub.refresh().failed()
    assert stub.history()[-1].payload["structural_limit_kind"] == "payload_size_bytes"
    assert event_types(stub).count("ActivityCompleted") == 1
    failed_tasks = Task.objects.filter(run_id=stub.run_id(), task_type="workflow").exclude(
        status="completed"
    )
    assert not failed_tasks.exists()


def test_a_run_closed_in_place_cancels_what_it_left_open(recorder, monkeypatch):
    stub = start("tests.eager.timer-left-open", "eager-left-open")
    asked = []
    real = sql.truths
    monkeypatch.setattr(sql, "truths", lambda *args: asked.append(args) or real(*args))
    executor.run_workflow_task(first_task(stub).id)
    assert stub.refresh().output() == 3
    assert "TimerCancelled" in event_types(stub)
    timers = Timer.objects.filter(run_id=stub.run_id()).values_list("status", flat=True)
    assert set(timers) == {"cancelled"}
    # The settle asked, under the lock, what the closing needs: no read of its own.
    assert asked == []


def test_a_sequential_step_is_one_round_trip(recorder):
    """Its settle assumes what it would ask (the run as this process left it, its lease
    held, nothing else waiting or open) and checks it along with the writes."""
    from django.db.backends import utils

    stub = start("tests.many-steps", "eager-one-trip", 12)
    calls = []
    real = utils.CursorWrapper._execute

    def counted(self, sql, *args):
        if "testapp_" not in sql:  # the activity's own bookkeeping
            calls.append(sql)
        return real(self, sql, *args)

    task_id = first_task(stub).id
    utils.CursorWrapper._execute = counted
    try:
        executor.run_workflow_task(task_id)
    finally:
        utils.CursorWrapper._execute = real
    assert stub.refresh().output() == sum(range(12))
    if connection.vendor == "postgresql":
        # The first workflow task (two) and one per step (the last one closes the run).
        assert len(calls) == 2 + 12, calls


def test_a_step_not_as_assumed_is_settled_as_usual(recorder, caplog):
    """Between two steps the activity itself signals its workflow: the run is no longer
    as this process left it, the assumed step is rolled back whole and done the regular
    way, and the signal is delivered."""
    caplog.set_level("DEBUG", logger="durable_workflow")
    stub = start("tests.eager.poked-between-steps", "eager-poked")
    run_ready(stub)
    assert stub.refresh().output() == [3, 7, 8]
    if connection.vendor == "postgresql":  # (elsewhere every step asks first)
        assert "was not as assumed" in caplog.text
    types = event_types(stub)
    assert types.count("ActivityCompleted") == 3 and types.count("SignalReceived") == 1
    sequences = [event.sequence for event in stub.history()]
    assert sequences == list(range(1, len(sequences) + 1))


def test_a_lease_lost_before_the_settle_records_nothing(recorder, monkeypatch):
    from durable_workflow.executor import activity_task

    stub = start("tests.many-steps", "eager-lost-lease", 3)
    real = activity_task._invoke
    stolen = []

    def steal_then_run(lease):
        if not stolen:  # another claim takes the task meanwhile
            Task.objects.filter(id=lease.task_id).update(lease_generation=lease.generation + 1)
            stolen.append(lease.task_id)
        return real(lease)

    monkeypatch.setattr(activity_task, "_invoke", steal_then_run)
    executor.run_workflow_task(first_task(stub).id)
    assert event_types(stub).count("ActivityCompleted") == 0
    assert Task.objects.get(id=stolen[0]).status == "leased"  # left to its new holder


def test_the_first_member_of_a_fan_out_is_settled_asking_first(recorder, caplog):
    """Its siblings are open, so assuming "nothing else open" would be refuted every time:
    only an activity its workflow task scheduled alone is settled on assumptions."""
    caplog.set_level("DEBUG", logger="durable_workflow")
    stub = start("tests.fanout", "eager-fan-first", 3)
    executor.run_workflow_task(first_task(stub).id)
    assert event_types(stub).count("ActivityCompleted") >= 1
    assert "was not as assumed" not in caplog.text


def test_a_step_refuted_inside_the_workflow_task_it_runs_is_settled_as_usual(recorder, caplog):
    """A cancel request between two steps: the refusal may come from a query the
    in-place workflow task sends; the whole step still goes back, and is done as usual."""
    caplog.set_level("DEBUG", logger="durable_workflow")
    stub = start("tests.eager.cancelled-between-steps", "eager-cancelled")
    assert set(run_ready(stub)) <= {"completed", "skipped"}
    assert stub.refresh().cancelled()
    types = event_types(stub)
    assert types.count("ActivityCompleted") == 2 and "WorkflowCancelled" in types
    assert "could not continue in place" not in caplog.text


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="claims are assumed where writes wait"
)
def test_a_claim_not_as_assumed_reads_the_task_again(recorder, monkeypatch):
    """The claim of a workflow task is checked with its writes; when the task changed
    after its read (here: under the same lock, by a writer that does not take it), the
    transaction goes back whole and the task is read and claimed again."""
    stub = start("tests.many-steps", "eager-claim-refuted", 2)
    real = tasks_store.claim_expected
    claims = []

    def claim_then_bump(task, **options):
        made = real(task, **options)
        if not claims:
            Task.objects.filter(id=task.id).update(lease_generation=task.lease_generation + 1)
        claims.append(task.id)
        return made

    monkeypatch.setattr(tasks_store, "claim_expected", claim_then_bump)
    assert executor.run_workflow_task(first_task(stub).id) == "completed"
    assert stub.refresh().output() == 1
    assert claims[0] == claims[1]  # the same task claimed twice: refuted, then taken
    task = Task.objects.get(id=claims[0])
    assert task.status == "completed" and task.lease_generation == 1  # the bump went back
