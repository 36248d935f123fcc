"""Replay determinism against stored history, and the ORM guard."""

from __future__ import annotations

import logging
import pathlib

import pytest
from django.db import connections

from durable_workflow import executor
from durable_workflow.executor import sticky
from durable_workflow.models import HistoryEvent, Task, WorkflowFailure
from tests.integration.helpers import event_types, start, tasks_of
from tests.testapp import workflows
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def run_next(stub, task_type):
    task = Task.objects.filter(run_id=stub.run_id(), task_type=task_type, status="ready").first()
    assert task is not None, f"no ready {task_type} task"
    runner = {
        "workflow": executor.run_workflow_task,
        "activity": executor.run_activity_task,
        "timer": executor.run_timer_task,
    }[task_type]
    return runner(task.id)


def test_resume_after_every_step_never_reruns_activities(inline):
    stub = start("tests.many-steps", "many-1", 6)
    inline.run()
    assert stub.refresh().output() == sum(range(6))
    # one invocation per step, although the body was replayed 7 times
    assert Invocation.objects.filter(name="add").count() == 6


def test_changed_code_fails_the_task_and_leaves_the_run_intact(inline, monkeypatch, caplog):
    stub = start("tests.sequential", "nd-1", "ada")
    assert run_next(stub, "workflow") == "completed"
    assert run_next(stub, "activity") == "completed"
    assert run_next(stub, "workflow") == "completed"  # step 2: Add scheduled
    before = list(HistoryEvent.objects.filter(run_id=stub.run_id()).values_list("id", flat=True))
    assert run_next(stub, "activity") == "completed"
    history_len = HistoryEvent.objects.filter(run_id=stub.run_id()).count()

    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)  # a timer now sits at step 2
    sticky.cache.clear()  # a deploy restarts workers: no warm bodies of the old code survive
    with caplog.at_level(logging.ERROR, logger="durable_workflow"):
        assert run_next(stub, "workflow") == "failed"
    # The worker's log line names what a person knows, and the error says what to do.
    [line] = [r.getMessage() for r in caplog.records if "workflow task" in r.getMessage()]
    assert line.startswith(f"workflow tests.sequential instance 'nd-1' (run {stub.run_id()}):")
    assert "dw.patched()" in line and "workflow_repair --instance-id" in line
    stub.refresh()
    assert stub.status() == "pending"  # not failed, not corrupted
    assert HistoryEvent.objects.filter(run_id=stub.run_id()).count() == history_len
    assert set(before) <= set(HistoryEvent.objects.values_list("id", flat=True))
    failed_task = tasks_of(stub, "workflow")[-1]
    assert failed_task.status == "failed"
    assert "step 2" in failed_task.last_error
    assert "ActivityScheduled(tests.add)" in failed_task.last_error
    assert "TimerScheduled" in failed_task.last_error
    row = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert row.failure_category == "task_failure"
    assert row.exception_class.endswith("NonDeterminismError")

    # fix the code, repair, and the run finishes on its original path
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 1)
    sticky.cache.clear()
    outcome = stub.repair(reason="deployed the fix")
    assert outcome.outcome == "repair_dispatched"
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == ["hello ada", 3]
    assert "RepairRequested" in event_types(stub)


def test_missing_step_is_detected(inline, monkeypatch):
    stub = start("tests.sequential", "nd-2", "ada")
    inline.run()
    assert stub.refresh().completed()
    # a query-style replay of the closed run with code that lost a step
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.exceptions import NonDeterminismError
    from durable_workflow.store import history

    class Shorter(workflows.Sequential):
        abstract = True

        def handle(self, name):
            return [workflows.dw.activity(workflows.Greet, name)]

    runtime = WorkflowRuntime(
        factory=lambda: Shorter._dw_instantiate(runtime), workflow_id="nd-2", run_id=stub.run_id()
    )
    with pytest.raises(NonDeterminismError) as info:
        runtime.feed(history.load_history(stub.run_id()))
    assert info.value.step == 2
    assert info.value.recorded == "ActivityScheduled(tests.add)"
    assert info.value.requested is None
    runtime.dispose()


def test_orm_access_in_a_body_is_refused_even_if_caught(inline):
    stub = start("tests.touches-orm", "orm-1")
    inline.run()
    stub.refresh()
    assert stub.status() == "pending"
    task = tasks_of(stub, "workflow")[0]
    assert task.status == "failed"
    assert "WorkflowOrmAccessError" in task.last_error
    assert event_types(stub) == ["StartAccepted", "WorkflowStarted"]


@pytest.mark.django_db(transaction=True, databases=["default", "workflows"])
@pytest.mark.parametrize("alias", ["default", "workflows"])
@pytest.mark.parametrize("policy", ["", "-warned", "-allowed"])
def test_database_access_in_a_body_is_refused_on_every_alias_open_or_not(inline, alias, policy):
    # Every connection is closed; the task reopens only the engine's alias before the
    # body runs, so each run of this test meets one open and one closed connection
    # (which is which depends on DW_TEST_ROUTED). Opening one reads the clock and
    # connects a socket: that is database access too, whatever the run's unsafe_calls.
    for connection in connections.all():
        connection.close()
    stub = start(f"tests.touches-alias{policy}", f"alias-{alias}{policy}", alias)
    inline.run()
    stub.refresh()
    assert stub.status() == "pending"
    [task] = tasks_of(stub, "workflow")
    assert task.status == "failed"
    assert "WorkflowOrmAccessError" in task.last_error, task.last_error
    assert "NonDeterministicCallError" not in task.last_error
    assert event_types(stub) == ["StartAccepted", "WorkflowStarted"]


def test_inline_steps_replay_identically(inline):
    stub = start("tests.inline", "inline-1")
    inline.run()
    stub.refresh()
    assert stub.completed()
    types = event_types(stub)
    assert types.count("SideEffectRecorded") == 3
    assert "TimerFired" in types and types.index("TimerScheduled") + 1 == types.index("TimerFired")
    assert not tasks_of(stub, "timer")  # timer(0) needs no timer task

    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history

    runtime = WorkflowRuntime(
        factory=lambda: workflows.Inline._dw_instantiate(runtime),
        workflow_id="inline-1",
        run_id=stub.run_id(),
    )
    runtime.feed(history.load_history(stub.run_id()))
    from durable_workflow.codec import envelope

    assert envelope.decode(runtime.closed.result) == stub.output()
    assert runtime.take_commands() == []


def test_repair_of_a_healthy_waiting_run_is_not_needed(inline):
    stub = start("tests.approval", "repair-waiting", "signal")
    inline.run()
    assert stub.refresh().status() == "waiting"
    assert stub.repair().outcome == "repair_not_needed"
    assert "RepairRequested" not in event_types(stub)


def test_a_divergence_names_the_call_site_and_the_steps_before_it(inline, monkeypatch):
    stub = start("tests.sequential", "nd-context", "ada")
    inline.run()
    assert stub.refresh().completed()
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)
    sticky.cache.clear()
    from durable_workflow.operations.replay import replay_instance

    result = replay_instance("nd-context")
    assert result.status == "nondeterministic"
    source = pathlib.Path(workflows.__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "dw.timer(5)" in text)
    assert result.call_site == f"{workflows.__file__}:{line}"
    assert result.recent_steps == ("step 1 ActivityScheduled(tests.greet)",)
    assert f"at {workflows.__file__}:{line}" in result.message
    assert "Recorded before it: step 1 ActivityScheduled(tests.greet)" in result.message
    assert "dw.patched()" in result.message and "workflow_repair" in result.message

    # a run that recorded more steps: only the last five are listed
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 1)
    many = start("tests.many-steps", "nd-many", 8)
    inline.run()
    assert many.refresh().completed()
    from tests.testapp.workflows import ManySteps

    def handle(self, count: int) -> int:
        for index in range(count - 1):
            workflows.dw.activity(workflows.Add, 0, index)
        workflows.dw.timer(1)
        return 0

    monkeypatch.setattr(ManySteps, "handle", handle)
    sticky.cache.clear()
    result = replay_instance("nd-many")
    assert result.step == 8
    assert result.recent_steps == tuple(
        f"step {n} ActivityScheduled(tests.add)" for n in range(3, 8)
    )
    assert result.call_site is not None and result.call_site.endswith(
        f"test_determinism.py:{handle.__code__.co_firstlineno + 3}"
    )

    # found after the body ran (it stopped before a recorded step): the steps are listed too
    def shorter(self, count: int) -> int:
        for index in range(count - 1):
            workflows.dw.activity(workflows.Add, 0, index)
        return 0

    monkeypatch.setattr(ManySteps, "handle", shorter)
    sticky.cache.clear()
    result = replay_instance("nd-many")
    assert result.status == "nondeterministic" and result.step == 8
    assert result.requested is None
    assert result.recent_steps[-1] == "step 7 ActivityScheduled(tests.add)"
    assert len(result.recent_steps) == 5
