"""Every scenario in fake mode: it reaches the outcome the feature promises."""

from __future__ import annotations

import pytest

from tests.testapp.data_goldens import PLAIN
from tests.testing.scenarios import SCENARIOS, FakeDriver, outcome

DATA_PLAIN = {
    "echoed": {"label": "queued", "value": PLAIN},
    "local": [PLAIN["text"], PLAIN["bytes"], 2],
    "effect": {"numeric_keys": {"1": 1}, "nested": [[{}]]},
    "items": [PLAIN["pairs"], {}, b""],
}

EXPECTED = {
    "sequential-activities": ("completed", ["hello Ada", 3]),
    "many-steps": ("completed", 10),
    "activity-retries": ("completed", "ok after 2"),
    "activity-failure-handled": (
        "completed",
        {
            "caught": {
                "type": "PaymentDeclined",
                "message": "attempt 1 declined",
                "is_activity_failed": True,
            },
            "after": 5,
        },
    ),
    "non-retryable-failure": ("failed", None),
    "workflow-fails": ("failed", None),
    "timer": ("completed", "Hello, Ada!"),
    "side-effects-and-uuids": ("completed", {"first": "int", "uuid": "str", "uuid7": "str"}),
    "workflow-and-activity-identity": (
        "completed",
        {"same_run": True, "same_workflow": True, "attempt_count": 1},
    ),
    "signal-wait": ("completed", "Ada"),
    "signal-timeout-wins": ("completed", None),
    "signal-beats-timeout": ("completed", "Bo"),
    "signal-handlers": ("completed", ["first", "second"]),
    "updates": ("completed", ["a", "b", "c"]),
    "condition-wait": ("completed", True),
    "condition-timeout": ("completed", False),
    "cancel": ("cancelled", None),
    "cancel-with-cleanup": ("cancelled", None),
    "child-workflow": ("completed", {"result": {"echo": 42}, "child_run_completed": True}),
    "child-failure-caught": ("completed", {"caught": "child refused 1", "child_failed": True}),
    "parallel-all": ("completed", [0, 1, 2]),
    "nested-parallel-with-child": ("completed", [1, [2, 6], {"echo": 11}]),
    "select": (
        "completed",
        {"winner": "work", "value": 42, "others": ["cancelled timer", "cancelled signal"]},
    ),
    "run-async": ("completed", [101, [2, 12]]),
    "continue-as-new": ("completed", {"ticks": 2, "run_id": True}),
    "saga-compensation": ("completed", "compensated"),
    "data-plain-values": ("completed", DATA_PLAIN),
    "data-messages": (
        "completed",
        {
            "signalled": [PLAIN["dollar_keys"], [1, 2.0]],
            "received": [PLAIN["numeric_keys"], PLAIN["bytes"]],
        },
    ),
    "data-child-and-continue": (
        "completed",
        {
            "generation": 2,
            "value": {
                "from_child": {"child_saw": {"text": PLAIN["text"], "empty": {}}},
                "bytes": b"\x01",
            },
        },
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_in_fake_mode(workflow_fake, scenario):
    stub = scenario.run(FakeDriver(), f"fake-{scenario.name}")
    result = outcome(scenario, stub)
    assert (result["status"], result["output"]) == EXPECTED[scenario.name], result["events"]


def test_every_scenario_has_an_expectation():
    assert {s.name for s in SCENARIOS} == set(EXPECTED)
