"""Golden histories of every feature must keep replaying clean against today's code.

A failure here means a change to the engine or to a test workflow would break
runs that are already in flight. Fix the code (or version the change with a
patch marker); re-record (tests/replay/record_goldens.py) only when the
history format itself is meant to change.
"""

from __future__ import annotations

import json
import pathlib

import pytest

import durable_workflow as dw
from durable_workflow import NonDeterminismError, Workflow
from durable_workflow.engine.events import TERMINAL_EVENTS
from durable_workflow.testing import Replayer
from tests.testapp import workflows
from tests.testapp.workflows import Add, Greet
from tests.testing.scenarios import SCENARIOS

HISTORIES = pathlib.Path(__file__).parent / "histories"
GOLDEN = sorted(HISTORIES.glob("*.json"))


def load(name: str) -> dict:
    return json.loads((HISTORIES / f"{name}.json").read_text())


def test_every_scenario_has_a_golden_history():
    assert {path.stem.split(".")[0] for path in GOLDEN} == {s.name for s in SCENARIOS}


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_history_replays_clean(path):
    document = json.loads(path.read_text())
    result = Replayer().replay(path)
    assert result.workflow_type == document["workflow_type"]
    assert result.events == len(document["events"])
    terminal = [e["event_type"] for e in document["events"] if e["event_type"] in TERMINAL_EVENTS]
    assert result.closed_by == terminal[-1]


# ----------------------------------------------------- changed code is caught
class InsertedTimer(Workflow):
    """tests.sequential with a timer slipped in between its two activities."""

    abstract = True  # not registered: passed to the Replayer explicitly

    def handle(self, name):
        greeting = dw.activity(Greet, name)
        dw.timer(5)
        return [greeting, dw.activity(Add, 1, 2)]


class StopsEarly(Workflow):
    abstract = True

    def handle(self, name):
        return [dw.activity(Greet, name)]


class GoesOn(Workflow):
    abstract = True

    def handle(self, name):
        greeting = dw.activity(Greet, name)
        total = dw.activity(Add, 1, 2)
        dw.activity(Add, 3, 4)
        return [greeting, total]


class FailsInstead(Workflow):
    abstract = True
    failure_exception_types = [ValueError]

    def handle(self, name):
        dw.activity(Greet, name)
        dw.activity(Add, 1, 2)
        raise ValueError("changed my mind")


def replay_sequential_with(cls):
    return Replayer({"tests.sequential": cls}).replay(load("sequential-activities"))


def test_a_changed_step_is_a_non_determinism_error():
    with pytest.raises(NonDeterminismError) as info:
        replay_sequential_with(InsertedTimer)
    error = info.value
    assert error.step == 2
    assert error.recorded == "ActivityScheduled(tests.add)"
    assert error.requested == "TimerScheduled"


def test_a_code_change_in_the_registered_workflow_is_caught(monkeypatch):
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)  # inserts a timer
    with pytest.raises(NonDeterminismError, match="history recorded ActivityScheduled"):
        Replayer().replay(load("sequential-activities"))


def test_a_recorded_step_the_code_never_reaches_is_caught():
    with pytest.raises(NonDeterminismError, match="never reached") as info:
        replay_sequential_with(StopsEarly)
    assert info.value.step == 2


def test_code_that_goes_on_after_history_ended_is_caught():
    with pytest.raises(NonDeterminismError, match="history ends with WorkflowCompleted") as info:
        replay_sequential_with(GoesOn)
    assert info.value.requested == "ActivityScheduled(tests.add)"


def test_code_that_closes_differently_is_caught():
    with pytest.raises(NonDeterminismError, match="does not close the run the way") as info:
        replay_sequential_with(FailsInstead)
    assert (info.value.recorded, info.value.requested) == ("WorkflowCompleted", "WorkflowFailed")


def test_code_that_now_parks_the_run_is_caught():
    from durable_workflow.engine.failures import BodyFailed

    class ParksInstead(FailsInstead):
        abstract = True
        failure_exception_types = []

    with pytest.raises(BodyFailed, match="changed my mind") as info:
        replay_sequential_with(ParksInstead)
    assert isinstance(info.value.error, ValueError)


def test_a_workflow_still_waiting_where_history_finished_is_caught():
    document = load("signal-wait")
    # drop the signal: the code now waits forever where history went on and completed
    document["events"] = [e for e in document["events"] if e["event_type"] != "SignalReceived"]
    with pytest.raises(NonDeterminismError, match="still waiting where history finished"):
        Replayer().replay(document)


def test_an_open_history_may_end_anywhere():
    document = load("signal-wait")
    cut = next(i for i, e in enumerate(document["events"]) if e["event_type"] == "SignalReceived")
    document["events"] = document["events"][:cut]  # the run was still waiting for the signal
    del document["workflow_task_sequence"]
    result = Replayer().replay(document)
    assert result.closed_by is None and result.steps == 1


# ------------------------------------- payloads recorded before the data converter
DATA_GOLDENS = sorted(HISTORIES.glob("data-*.json"))


def _envelopes(value: object) -> list[dict]:
    """Every payload envelope inside an event payload."""
    if isinstance(value, dict):
        if "codec" in value and ("blob" in value or "external_storage" in value):
            return [value]
        return [env for item in value.values() for env in _envelopes(item)]
    if isinstance(value, list):
        return [env for item in value for env in _envelopes(item)]
    return []


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


def test_the_data_goldens_were_recorded():
    assert {p.stem.split(".")[0] for p in DATA_GOLDENS} == {
        "data-plain-values",
        "data-messages",
        "data-child-and-continue",
    }


@pytest.mark.parametrize("path", DATA_GOLDENS, ids=lambda p: p.stem)
def test_payloads_recorded_before_the_converter_decode_exactly_as_before(path):
    """The codec's own decoding is what the code before the converter returned; the
    converter, with no declared type and with the receivers' declared types (all
    plain here), must give back exactly that: same values, same types, same order."""
    from durable_workflow.codec import envelope
    from durable_workflow.converter import arguments_from_plain, from_plain, handle_signature
    from tests.testapp import data_goldens

    receivers = {
        "tests.data-plain": data_goldens.PlainValues,
        "tests.data-messages": data_goldens.PlainMessages,
        "tests.data-chain": data_goldens.PlainChain,
    }
    document = json.loads(path.read_text())
    signature = handle_signature(receivers[document["workflow_type"]])
    checked = 0
    for event in document["events"]:
        for env in _envelopes(event["payload"]):
            before = envelope.decode(env)
            assert _same(from_plain(before), before), event["event_type"]
            if event["event_type"] == "WorkflowCompleted":
                assert _same(from_plain(before, signature.result), before)
            if event["event_type"] == "WorkflowStarted":
                typed = arguments_from_plain(before, signature, receiver="workflow")
                assert _same(typed, before)
            checked += 1
    assert checked >= 2
    result = Replayer().replay(document)
    assert result.events == len(document["events"])
