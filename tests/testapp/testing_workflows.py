"""Workflows for the testing kit's own tests (the spec's testing examples, in Python)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow


class MyActivity(Activity):
    type_key = "kit.my-activity"

    def handle(self, name: str) -> str:
        raise AssertionError("the real MyActivity must not run in these tests: mock it")


class GreetingActivity(Activity):
    type_key = "kit.greeting"

    def handle(self, name: str) -> str:
        return f"Hello, {name}!"


class Charge(Activity):
    """Retries quickly: a mock that raises exercises retries without time travel."""

    type_key = "kit.charge"
    tries = 3

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, amount: int) -> str:
        return f"charged {amount}"


class SlowRetry(Activity):
    """Retries after 30 seconds: the retry is a durable task that waits for the clock."""

    type_key = "kit.slow-retry"
    tries = 2

    def backoff(self) -> list[int]:
        return [30]

    def handle(self) -> str:
        return "done"


class MyWorkflow(Workflow):
    type_key = "kit.my-workflow"

    def handle(self) -> dict[str, Any]:
        return {
            "result": dw.activity(MyActivity, "Taylor"),
            "workflow_id": self.workflow_id(),
            "run_id": self.run_id(),
        }


class MyTimerWorkflow(Workflow):
    type_key = "kit.my-timer-workflow"

    def handle(self) -> dict[str, bool]:
        dw.timer(60)
        return {"done": True}


class ApprovalWorkflow(Workflow):
    type_key = "kit.approval-workflow"
    signals = ["name-provided"]

    def handle(self) -> dict[str, str]:
        name = dw.wait_signal("name-provided")
        greeting = dw.activity(GreetingActivity, name)
        return {"name": name, "greeting": greeting}


class SettingsWorkflow(Workflow):
    type_key = "kit.settings-workflow"
    signals = ["done"]

    def __init__(self) -> None:
        self.enabled = False

    @dw.update
    def toggle(self, enabled: bool) -> dict[str, bool]:
        self.enabled = enabled
        return {"enabled": self.enabled}

    def handle(self) -> dict[str, bool]:
        dw.wait_signal("done")
        return {"enabled": self.enabled}


class ChargeWorkflow(Workflow):
    type_key = "kit.charge-workflow"

    def handle(self, amounts: list[int]) -> list[Any]:
        out: list[Any] = []
        for amount in amounts:
            try:
                out.append(dw.activity(Charge, amount))
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return out


class SlowRetryWorkflow(Workflow):
    type_key = "kit.slow-retry-workflow"

    def handle(self) -> str:
        return str(dw.activity(SlowRetry))


class NapThenGreet(Workflow):
    """A short timer then an activity: runs the same with a real worker and in fake mode."""

    type_key = "kit.nap-then-greet"

    def handle(self, seconds: int, name: str) -> str:
        dw.timer(seconds)
        return str(dw.activity(GreetingActivity, name))
