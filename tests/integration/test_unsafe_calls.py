"""Guarded calls: the clock, randomness, the environment and I/O are refused in workflow code."""

from __future__ import annotations

import collections
import logging
import pathlib
import threading
import time

import greenlet
import pytest
from django.test import override_settings

from durable_workflow import NonDeterministicCallError
from durable_workflow.models import WorkflowFailure
from tests.integration.helpers import start, tasks_of
from tests.testapp import unsafe

pytestmark = pytest.mark.django_db(transaction=True)


def parked_error(stub) -> str:
    stub.refresh()
    assert stub.status() == "pending"
    task = tasks_of(stub, "workflow")[-1]
    assert task.status == "failed"
    return task.last_error


@pytest.mark.parametrize("call", sorted(unsafe.CALLS))
def test_each_guarded_call_is_refused_in_a_body_and_works_outside(inline, call):
    unsafe.CALLS[call]()  # outside workflow code: unchanged
    stub = start("tests.unsafe", f"unsafe-{call}", call)
    inline.run()
    error = parked_error(stub)
    assert "NonDeterministicCallError" in error
    assert call in error
    assert f"{unsafe.__file__}:" in error  # the workflow code's file and line
    row = WorkflowFailure.objects.get(run_id=stub.run_id())
    assert row.exception_class.endswith("NonDeterministicCallError")
    assert row.details["task_failure_reason"] == "nondeterministic_call"


def test_the_error_names_the_line_and_the_replacement(inline):
    stub = start("tests.unsafe", "unsafe-line", "time.time")
    inline.run()
    error = parked_error(stub)
    source = pathlib.Path(unsafe.__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if '"time.time": lambda' in text)
    assert f"{unsafe.__file__}:{line}" in error
    assert "dw.now()" in error
    assert NonDeterministicCallError("uuid.uuid4").replacement.startswith("dw.uuid4()")
    assert "activity" in NonDeterministicCallError("socket.connect").replacement


def test_a_branch_on_the_clock_completes_silently_wrong_unguarded_and_is_stopped_guarded(inline):
    # What the issue reported: with nothing refusing the call, the run completes with
    # whatever the last replay computed, not what its first run decided.
    runs = [start("tests.branches-on-clock", f"clock-{n}") for n in range(3)]
    inline.run()
    assert all(stub.refresh().completed() for stub in runs)
    guarded = start("tests.branches-on-clock-guarded", "clock-guarded")
    inline.run()
    assert "time.time" in parked_error(guarded)


def test_other_threads_and_greenlets_are_untouched_while_a_body_runs(inline):
    stop = threading.Event()
    seen: list[object] = []

    def other_thread() -> None:
        while not stop.is_set():
            seen.append(unsafe.CALLS["time.time"]())
            seen.append(unsafe.CALLS["random.random"]())
            time.sleep(0.001)

    worker = threading.Thread(target=other_thread)
    worker.start()
    try:
        stubs = [start("tests.unsafe", f"threads-{n}", "time.time") for n in range(5)]
        inline.run()
        other = greenlet.greenlet(lambda: unsafe.CALLS["uuid.uuid4"]()).switch()
    finally:
        stop.set()
        worker.join()
    assert seen and other is not None
    assert all("time.time" in parked_error(stub) for stub in stubs)


def test_logging_imports_side_effects_and_seeded_generators_are_allowed(inline, caplog):
    with caplog.at_level(logging.INFO, logger="tests.unsafe"):
        stub = start("tests.safe-calls", "safe-1")
        inline.run()
    assert stub.refresh().completed(), tasks_of(stub, "workflow")[-1].last_error
    output = stub.output()
    assert output["imported"] and output["rolled"] == 6
    assert any("starting at" in r.getMessage() for r in caplog.records)


def test_warn_logs_once_per_call_site_and_the_run_completes(inline, caplog):
    with caplog.at_level(logging.WARNING, logger="durable_workflow.guards"):
        stub = start("tests.unsafe-warned", "warned-1", "random.random")
        inline.run()
    assert stub.refresh().completed()
    warned = [r.getMessage() for r in caplog.records if "random.random" in r.getMessage()]
    assert len(warned) == 1  # two workflow tasks replayed the call; one line


def test_allow_on_the_class_and_the_setting(inline):
    stub = start("tests.unsafe-allowed", "allowed-1", "os.getpid")
    inline.run()
    assert stub.refresh().completed()
    with override_settings(DURABLE_WORKFLOW={"UNSAFE_CALLS": "allow"}):
        stub = start("tests.unsafe", "allowed-2", "os.urandom")
        inline.run()
        assert stub.refresh().completed()
    stub = start("tests.unsafe", "raised-again", "os.urandom")
    inline.run()
    assert "os.urandom" in parked_error(stub)


@pytest.mark.parametrize("where", ["signal", "predicate"])
def test_handlers_and_predicates_are_guarded(inline, where):
    stub = start("tests.clock-in-handlers", f"handlers-{where}")
    inline.run()
    stub.signal("poke", where)
    inline.run()
    assert "time.time" in parked_error(stub)


def test_a_query_is_guarded(inline):
    stub = start("tests.clock-in-handlers", "handlers-query")
    inline.run()
    stub.signal("poke", "query")
    inline.run()
    with pytest.raises(Exception, match=r"time\.time"):
        stub.query("peek")


def test_a_bad_policy_is_refused_where_it_is_declared():
    from durable_workflow import ConfigurationError, Workflow

    with pytest.raises(ConfigurationError, match="unsafe_calls"):

        class Sloppy(Workflow):
            abstract = True
            unsafe_calls = "sometimes"  # type: ignore[assignment]


def test_a_step_makes_few_guarded_calls_outside_bodies(inline, monkeypatch):
    # What the guards cost a worker is (calls per step) x (the wrapper's overhead), the
    # second measured by benchmarks/guard_overhead.py; this keeps the first in check.
    from durable_workflow import unsafe_calls

    counts: collections.Counter[str] = collections.Counter()
    for module, names in unsafe_calls.MODULE_CALLS.items():
        for name in names:
            wrapped = getattr(module, name)

            def counting(*args, _fn=wrapped, _name=f"{module.__name__}.{name}", **kwargs):
                counts[_name] += 1
                return _fn(*args, **kwargs)

            monkeypatch.setattr(module, name, counting)
    stub = start("tests.many-steps", "counted-1", 20)
    counts.clear()
    inline.run()
    assert stub.refresh().completed()
    assert sum(counts.values()) <= 20 * 20, counts  # 20 steps (workflow + activity task)
    # A cold replay of the whole history makes none: nothing per event.
    from durable_workflow.operations.replay import replay_instance

    bundle_counts = sum(counts.values())
    result = replay_instance("counted-1")
    assert result.ok and result.events > 40
    assert sum(counts.values()) == bundle_counts, counts


def test_a_call_through_a_helper_module_is_refused_and_blamed_on_the_body(inline):
    stub = start("tests.clock-via-helper", "via-helper")
    inline.run()
    error = parked_error(stub)
    assert "time.time" in error
    assert f"{unsafe.__file__}:" in error  # the body's line, not the helper's
