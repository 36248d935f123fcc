"""Random workflow programs behave the same warm (sticky), cold, and replayed after every step.

Hypothesis writes small programs out of activities (some failing), timers, signal waits,
waits that time out, side effects, ``dw.now()``, ``dw.all`` groups and ``run_async``
branches. One interpreter workflow runs each program three ways:

* ``warm``: sticky on, so every workflow task after the first resumes the cached body;
* ``cold``: ``STICKY_ENABLED`` off, so every workflow task replays the whole history;
* ``replayed``: sticky on, but after every workflow task the cache is emptied and the
  ``Replayer`` replays the history so far from scratch, exactly where the task stopped.

All three must return the same output (and the one a plain-Python model of the program
predicts) and write the same history: event types, decoded payloads and timestamps, with
ids compared by where they first appear. Tasks run one at a time in an order chosen from
the history alone (workflow tasks first, then the earliest-scheduled step), with the
clock frozen and moved only to the next timer, so nothing but the engine can differ.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durable_workflow as dw
from durable_workflow import Activity, ActivityFailed, Workflow, WorkflowStub, clock, executor
from durable_workflow.codec import envelope
from durable_workflow.executor import sticky
from durable_workflow.models import Task, TaskStatus, Timer, TimerStatus
from durable_workflow.testing import Replayer, freeze, travel_to
from tests.conftest import scaled
from tests.integration.helpers import event_types

pytestmark = pytest.mark.django_db(transaction=True)

SIGNALS = ["approve", "ship"]
NEVER = "never-sent"  # waited on with a timeout; the driver never sends it
START = dt.datetime(2031, 1, 1, tzinfo=dt.UTC)
MAX_ROUNDS = 200
_instances = itertools.count()


class Double(Activity):
    type_key = "tests.property.double"

    def handle(self, value: int) -> int:
        return value * 2 + 1


class Refuse(Activity):
    type_key = "tests.property.refuse"

    def handle(self, value: int) -> None:
        raise ValueError(f"refused {value}")


class ProgramWorkflow(Workflow):
    """Runs a program (see ``programs`` below) and returns one value per step."""

    type_key = "tests.property.program"
    signals = [*SIGNALS, NEVER]

    def handle(self, program: list[list[Any]]) -> list[Any]:
        return [self.step(step) for step in program]

    def step(self, step: list[Any]) -> Any:
        kind, arg = step
        if kind == "activity":
            return dw.activity(Double, arg)
        if kind == "fail":
            try:
                return dw.activity(Refuse, arg)
            except ActivityFailed:
                return f"failed {arg}"
        if kind == "timer":
            return dw.timer(arg)
        if kind == "signal":
            return dw.wait_signal(arg)
        if kind == "timeout":
            return dw.wait(NEVER, timeout=arg)
        if kind == "side_effect":
            return dw.side_effect(lambda: arg * 3)
        if kind == "now":
            return dw.now().isoformat()
        if kind == "all":
            return dw.all([self.member(member) for member in arg])
        if kind == "branch":
            return dw.run_async(lambda: [self.step(inner) for inner in arg])
        raise AssertionError(f"unknown step {kind!r}")

    def member(self, step: list[Any]) -> Callable[[], Any]:
        """A member of ``dw.all`` makes one durable call; anything else runs as a branch."""
        if step[0] in ("activity", "timer", "signal", "all"):
            return lambda: self.step(step)
        return lambda: dw.run_async(lambda: self.step(step))


# ------------------------------------------------------------------ programs
values = st.integers(min_value=0, max_value=99)
durations = st.integers(min_value=1, max_value=4).map(lambda n: n * 60)  # ties are welcome
leaves = st.one_of(
    st.tuples(st.just("activity"), values),
    st.tuples(st.just("fail"), values),
    st.tuples(st.just("timer"), durations),
    st.tuples(st.just("signal"), st.sampled_from(SIGNALS)),
    st.tuples(st.just("timeout"), durations),
    st.tuples(st.just("side_effect"), values),
    st.tuples(st.just("now"), st.just(0)),
).map(list)
steps = st.recursive(
    leaves,
    lambda inner: st.tuples(
        st.sampled_from(["all", "branch"]), st.lists(inner, min_size=1, max_size=3)
    ).map(list),
    max_leaves=8,
)
programs = st.lists(steps, min_size=1, max_size=5)


class _AnyTime(str):
    """What the model predicts for ``dw.now()``: any ISO timestamp."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and dt.datetime.fromisoformat(other) >= START

    __hash__ = str.__hash__


def expected(step: list[Any]) -> Any:
    """The value a step returns, computed without the engine."""
    kind, arg = step
    model: dict[str, Callable[[], Any]] = {
        "activity": lambda: arg * 2 + 1,
        "fail": lambda: f"failed {arg}",
        "timer": lambda: None,
        "signal": lambda: signal_value(arg),
        "timeout": lambda: None,
        "side_effect": lambda: arg * 3,
        "now": lambda: _AnyTime(),
        "all": lambda: [expected(inner) for inner in arg],
        "branch": lambda: [expected(inner) for inner in arg],
    }
    return model[kind]()


def signal_value(name: str) -> str:
    return f"{name}!"


# -------------------------------------------------------------------- driving
RUNNERS: dict[str, Callable[[Any], Any]] = {
    "workflow": executor.run_workflow_task,
    "activity": executor.run_activity_task,
    "timer": executor.run_timer_task,
}


def next_task(run_id: str) -> Task | None:
    """The ready task to run next, chosen from the run's state (ids are random)."""
    ready = Task.objects.filter(
        run_id=run_id, status=TaskStatus.READY, available_at__lte=clock.now()
    ).select_related("activity_execution", "timer")

    def key(task: Task) -> tuple[int, int]:
        if task.task_type == "workflow":
            return (0, 0)
        owner = task.activity_execution or task.timer
        assert owner is not None, task
        return (1, owner.sequence)

    return min(ready, key=key, default=None)


def open_signal_wait(stub: WorkflowStub) -> str | None:
    """The name of the earliest-opened signal wait that no signal has answered yet."""
    opened: dict[int, str] = {}
    for event in stub.history():
        if event.event_type == "SignalWaitOpened":
            opened[event.payload["sequence"]] = event.payload["signal_name"]
        elif event.event_type == "SignalApplied":
            opened.pop(event.payload["sequence"], None)
    names = [name for _, name in sorted(opened.items()) if name != NEVER]
    return names[0] if names else None


def drive(
    stub: WorkflowStub, extra_signals: list[str], after_workflow_task: Callable[[str], None]
) -> int:
    """Run the program to its end; returns how many workflow tasks that took.

    Whenever nothing is ready: send the next extra signal (buffered until a wait takes
    it), else answer the earliest open signal wait, else move time to the next timer.
    """
    run_id = stub.run_id()
    assert run_id is not None
    extra = list(extra_signals)
    workflow_tasks = 0
    for _ in range(MAX_ROUNDS):
        task = next_task(run_id)
        if task is not None:
            RUNNERS[task.task_type](task.id)
            if task.task_type == "workflow":
                workflow_tasks += 1
                after_workflow_task(run_id)
            continue
        if not stub.refresh().running():
            return workflow_tasks
        name = extra.pop(0) if extra else open_signal_wait(stub)
        if name is not None:
            stub.signal(name, signal_value(name))
            continue
        timer = Timer.objects.filter(run_id=run_id, status=TimerStatus.PENDING)
        timer = timer.order_by("fire_at", "sequence").first()
        assert timer is not None, f"run stuck in {stub.status()}: {event_types(stub)}"
        travel_to(timer.fire_at)
    raise AssertionError(f"no end after {MAX_ROUNDS} rounds: {event_types(stub)}")


def replay_cold(run_id: str) -> None:
    sticky.cache.clear()
    Replayer().replay_run(run_id)


def run(
    program: list[list[Any]], extra_signals: list[str], *, mode: str
) -> tuple[Any, list[Any], dict[str, int]]:
    """Output, canonical history and sticky counters of one run of ``program``."""
    overrides = {
        **django_settings.DURABLE_WORKFLOW,
        "STICKY_ENABLED": mode != "cold",
        # an eager workflow task would bypass the driver and its hook
        "EAGER_WORKFLOW_TASKS": False,
    }
    after = replay_cold if mode == "replayed" else lambda run_id: None
    with override_settings(DURABLE_WORKFLOW=overrides), freeze(START):
        before = sticky.cache.stats.as_dict()
        stub = WorkflowStub.make(ProgramWorkflow, f"prop-{next(_instances)}-{mode}")
        stub.start(program)
        workflow_tasks = drive(stub, extra_signals, after)
        stats = {k: v - before[k] for k, v in sticky.cache.stats.as_dict().items()}
    assert stub.completed(), (mode, stub.status(), event_types(stub))
    stats["workflow_tasks"] = workflow_tasks
    return stub.output(), canonical_history(stub), stats


# ------------------------------------------------------------------ comparing
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical_history(stub: WorkflowStub) -> list[Any]:
    """Events with payloads decoded, and ids and the instance id replaced by stable names."""
    names: dict[str, str] = {stub.id(): "<instance>"}

    def canon(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"codec", "blob"}:
                return ("decoded", canon(envelope.decode(value)))
            return {key: canon(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [canon(item) for item in value]
        if isinstance(value, uuid.UUID):
            value = str(value)
        if isinstance(value, str) and (value in names or _UUID.fullmatch(value)):
            return names.setdefault(value, f"<id {len(names)}>")
        return value

    return [
        (event.sequence, event.event_type, canon(event.payload), event.recorded_at)
        for event in stub.history()
    ]


@settings(
    max_examples=scaled(30),
    deadline=None,
    database=None,  # nothing written into the work tree; failures print their example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs, extra_signals=st.lists(st.sampled_from(SIGNALS), max_size=2))
def test_warm_cold_and_replayed_runs_agree(inline, program, extra_signals):
    warm_output, warm_history, warm = run(program, extra_signals, mode="warm")
    cold_output, cold_history, cold = run(program, extra_signals, mode="cold")
    replayed_output, replayed_history, replayed = run(program, extra_signals, mode="replayed")

    assert [expected(step) for step in program] == warm_output
    assert cold_output == warm_output
    assert replayed_output == warm_output
    assert cold_history == warm_history
    assert replayed_history == warm_history
    # not vacuous: warm resumed the cached body every time, the others never did
    assert warm["hits"] == warm["workflow_tasks"] - 1, warm
    assert warm["forced_cold"] == 0, warm
    assert cold["hits"] == 0 and cold["misses"] == 0, cold
    assert replayed["hits"] == 0, replayed
    assert replayed["misses"] == replayed["workflow_tasks"], replayed
    assert warm["workflow_tasks"] == cold["workflow_tasks"] == replayed["workflow_tasks"]
