"""One scenario per engine feature, written once and driven two ways.

A scenario talks to a *driver*: ``FakeDriver`` runs everything inline in fake
mode and moves the engine clock; ``WorkerDriver`` (tests/testing/test_fake_vs_real.py)
lets a real Celery worker do the work and sleeps for real. The same
scenarios also record the golden histories under tests/replay/histories.
Waits are short (1 s) so the real-worker run stays quick.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from durable_workflow import WorkflowStub
from durable_workflow.testing import travel
from tests.testing import pattern_scenarios

IGNORED_EVENTS = {"ActivityHeartbeatRecorded"}


class FakeDriver:
    """Fake mode: commands run inline; sleeping moves the engine clock."""

    def start(self, workflow: str, instance_id: str, *args: Any) -> WorkflowStub:
        stub = WorkflowStub.make(workflow, instance_id)
        stub.start(*args)
        return stub

    def settle(self) -> None:
        WorkflowStub.run_ready_tasks()

    def sleep(self, seconds: float) -> None:
        travel(seconds=seconds)
        self.settle()


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Any, str], WorkflowStub]
    #: Turns an output into what both ways must agree on (random values removed).
    normalize: Callable[[Any, WorkflowStub], Any] = lambda output, stub: output


def _sequential(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.sequential", iid, "Ada")


def _many_steps(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.many-steps", iid, 5)


def _retries(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.retrying", iid, 2)


def _failure_handled(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.catch-failure", iid)


def _non_retryable(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.non-retryable", iid)


def _workflow_fails(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.crashes", iid, "boom")


def _timer(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("kit.nap-then-greet", iid, 1, "Ada")
    d.sleep(1.2)
    return stub


def _side_effects(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.inline", iid)


def _shape_of_side_effects(output: Any, stub: WorkflowStub) -> Any:
    return {key: type(value).__name__ for key, value in output.items()}


def _identity(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.identity", iid)


def _ids_replaced(output: Any, stub: WorkflowStub) -> Any:
    inside = output["activity"]
    return {
        "same_run": output["run_id"] == stub.run_id() == inside["run_id"],
        "same_workflow": output["workflow_id"] == stub.id() == inside["workflow_id"],
        "attempt_count": inside["attempt_count"],
    }


def _signal(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "signal")
    stub.signal("approved-by", "Ada")
    d.settle()
    return stub


def _signal_timeout(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "signal-timeout", 1)
    d.sleep(1.2)
    return stub


def _signal_beats_timeout(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "signal-timeout", 60)
    stub.signal("approved-by", "Bo")
    d.settle()
    return stub


def _signal_handlers(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.handlers", iid, 2)
    stub.signal("note", "first")
    d.settle()
    stub.signal("note", "second")
    d.settle()
    return stub


def _updates(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "updates")
    for item in ("a", "b", "c"):
        assert stub.update("add-item", item) == ["a", "b", "c"].index(item) + 1
        d.settle()
    return stub


def _headers(d: Any, iid: str) -> WorkflowStub:
    """Headers on the start, an update and a signal, recorded in history; no interceptors
    (a worker process of the real-worker run has none), so the activity and child get none."""
    headers = {"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-01"}
    stub = WorkflowStub.make("tests.tenancy.order", iid).with_headers(headers)
    stub.start()
    d.settle()
    assert stub.with_headers({"request-id": "u-1"}).update("rename", "x") == "X"
    d.settle()
    stub.with_headers({"request-id": "s-1"}).signal("poke", "go")
    d.settle()
    return stub


def _condition(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "condition", 60)
    stub.update("mark-ready", True)
    d.settle()
    return stub


def _condition_timeout(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.approval", iid, "condition", 1)
    d.sleep(1.2)
    return stub


def _cancel(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.cancellable", iid, "timer")
    stub.cancel("changed my mind")
    d.settle()
    return stub


def _cancel_with_cleanup(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.cancellable", iid, "cleanup")
    stub.cancel("clean up first")
    d.settle()
    return stub


def _child(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.parent", iid, "simple")


def _child_ids_replaced(output: Any, stub: WorkflowStub) -> Any:
    child = WorkflowStub.load(output["child_id"])
    return {
        "result": output["result"],
        "child_run_completed": child.run_id() == output["run"] and child.completed(),
    }


def _child_failure(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.parent", iid, "catch")


def _parallel(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.fanout", iid, 3)


def _nested_parallel(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.nested", iid)


def _select(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.selector", iid, 3600)


def _run_async(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.async-branches", iid)


def _continue_as_new(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.looper", iid, 2)
    stub.signal("tick")
    d.settle()
    stub.refresh().signal("tick")  # the second run
    d.settle()
    return stub


def _run_id_replaced(output: Any, stub: WorkflowStub) -> Any:
    return {**output, "run_id": output["run_id"] == stub.refresh().run_id()}


def _saga(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.booking", iid, 2)


def _data_plain(d: Any, iid: str) -> WorkflowStub:
    from tests.testapp.data_goldens import PLAIN

    return d.start("tests.data-plain", iid, PLAIN, [PLAIN["pairs"], {}, b""])


def _data_messages(d: Any, iid: str) -> WorkflowStub:
    from tests.testapp.data_goldens import PLAIN

    stub = d.start("tests.data-messages", iid)
    stub.signal("values", PLAIN["dollar_keys"], [1, 2.0])
    d.settle()
    assert stub.update("collect", PLAIN["numeric_keys"])["count"] == 1
    d.settle()
    assert stub.update("collect", PLAIN["bytes"])["count"] == 2
    d.settle()
    return stub


def _data_chain(d: Any, iid: str) -> WorkflowStub:
    from tests.testapp.data_goldens import PLAIN

    return d.start("tests.data-chain", iid, {"text": PLAIN["text"], "empty": {}})


SCENARIOS = [
    Scenario("sequential-activities", _sequential),
    Scenario("many-steps", _many_steps),
    Scenario("activity-retries", _retries),
    Scenario("activity-failure-handled", _failure_handled),
    Scenario("non-retryable-failure", _non_retryable),
    Scenario("workflow-fails", _workflow_fails),
    Scenario("timer", _timer),
    Scenario("side-effects-and-uuids", _side_effects, _shape_of_side_effects),
    Scenario("workflow-and-activity-identity", _identity, _ids_replaced),
    Scenario("signal-wait", _signal),
    Scenario("signal-timeout-wins", _signal_timeout),
    Scenario("signal-beats-timeout", _signal_beats_timeout),
    Scenario("signal-handlers", _signal_handlers),
    Scenario("updates", _updates),
    Scenario("headers", _headers),
    Scenario("condition-wait", _condition),
    Scenario("condition-timeout", _condition_timeout),
    Scenario("cancel", _cancel),
    Scenario("cancel-with-cleanup", _cancel_with_cleanup),
    Scenario("child-workflow", _child, _child_ids_replaced),
    Scenario("child-failure-caught", _child_failure),
    Scenario("parallel-all", _parallel),
    Scenario("nested-parallel-with-child", _nested_parallel),
    Scenario("select", _select),
    Scenario("run-async", _run_async),
    Scenario("continue-as-new", _continue_as_new, _run_id_replaced),
    Scenario("saga-compensation", _saga),
    Scenario("data-plain-values", _data_plain),
    Scenario("data-messages", _data_messages),
    Scenario("data-child-and-continue", _data_chain),
]
SCENARIOS += pattern_scenarios.scenarios()  # issue 21's everyday patterns


def outcome(scenario: Scenario, stub: WorkflowStub) -> dict[str, Any]:
    """What two ways of running a scenario must agree on."""
    stub.refresh()
    output = stub.output()
    return {
        "status": stub.status(),
        "output": scenario.normalize(output, stub) if output is not None else None,
        "events": _concurrent_runs_sorted(
            [e.event_type for e in stub.history() if e.event_type not in IGNORED_EVENTS]
        ),
    }


_ATTEMPT_EVENTS = {"ActivityStarted", "ActivityCompleted"}


def _concurrent_runs_sorted(kinds: list[str]) -> list[str]:
    """Sort each stretch of consecutive attempt starts and results: members of a
    fan-out may start and finish in any interleaving (a worker takes several at once),
    which says nothing about the workflow."""
    out: list[str] = []
    stretch: list[str] = []
    for kind in [*kinds, ""]:
        if kind in _ATTEMPT_EVENTS:
            stretch.append(kind)
            continue
        out += sorted(stretch)
        stretch = []
        if kind:
            out.append(kind)
    return out
