"""Steps whose outcome the executor records in the same task: a child's start, a signal sent."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow
from durable_workflow.engine import commands as c
from tests.unit.harness import Harness


class Sends(Workflow):
    type_key = "unit.sends"

    def handle(self) -> Any:
        result = dw.external_workflow("other").attempt_signal("go", 1)
        dw.timer(5)
        return [result.accepted, result.outcome]


def test_the_body_waits_for_the_outcome_and_takes_it_from_history():
    h = Harness(Sends)
    runtime = h.runtime()
    runtime.feed(h.events)
    [command] = runtime.take_commands()
    assert isinstance(command, c.SignalExternal) and command.instance_id == "other"
    assert runtime.take_refeed() is True
    assert runtime.take_refeed() is False  # taken once
    h.add(
        "ExternalSignalSent",
        sequence=1,
        signal_name="go",
        target_instance_id="other",
        outcome="rejected_not_active",
        rejection_reason="run_not_active",
    )
    runtime.feed(h.events)  # the same runtime goes on: the timer is the next command
    [timer] = runtime.take_commands()
    assert isinstance(timer, c.StartTimer) and timer.step == 2
    h.add("TimerScheduled", sequence=2, delay_seconds=5)
    h.fire(2)
    cold = h.runtime()
    cold.feed(h.events)  # replayed cold: nothing is sent again
    assert cold.take_commands() == [] and cold.take_refeed() is False
    assert isinstance(cold.closed, c.CompleteWorkflow)


def test_a_changed_signal_name_is_a_determinism_error():
    import pytest

    from durable_workflow import NonDeterminismError

    h = Harness(Sends)
    h.add("ExternalSignalSent", sequence=1, signal_name="stop", outcome="signal_received")
    with pytest.raises(NonDeterminismError):
        h.runtime().feed(h.events)
