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
    "headers": (
        "completed",
        {
            "headers": {"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-01"},
            "activity": {"label": "a", "tenant": None, "headers": {}},
            "child": {
                "child_headers": {},
                "activity": {"label": "c", "tenant": None, "headers": {}},
            },
        },
    ),
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
    # issue 21's everyday patterns (tests/testing/pattern_scenarios.py)
    "start-child-handle": ("completed", {"value": "x", "go": "now"}),
    "child-handles-in-select": ("completed", ["fast", {"echo": 2}, "late"]),
    "child-handle-cancel": ("completed", "child cancelled"),
    "child-instance-id": ("completed", {"own_id": True, "result": {"echo": 6}}),
    "child-instance-id-taken": ("completed", ["rejected_duplicate", "instance_already_started"]),
    "external-signal": ("completed", "sent"),
    "external-cancel": ("completed", "cancel requested"),
    "workflow-info": (
        "completed",
        {
            "ids": [True, True, 1, "tests.patterns.introspects"],
            "grew": True,
            "memo": [{}, {"stage": "after"}],
            "activity": {
                "activity_id": True,
                "type": "tests.patterns.reports-info",
                "attempt": 2,
                "workflow": [True, "tests.patterns.introspects"],
                "previous_heartbeat": {"message": "half way", "current": 5, "total": 10},
                "times": [True, True],
                "token": True,
            },
            "child_parent": True,
        },
    ),
    "update-with-start": ("completed", ["a", "b", "c"]),
    "handlers-lock": ("completed", ["a:in", "a:out", "b:in", "b:out", "c:in", "c:out"]),
    "handlers-semaphore": ("completed", ["a:in", "b:in", "b:out", "c:in", "c:out", "a:out"]),
    "async-completion": ("completed", {"approved": True}),
    "subsecond-timers": ("completed", True),
    "schedule-manual-trigger": ("completed", True),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_in_fake_mode(workflow_fake, scenario):
    stub = scenario.run(FakeDriver(), f"fake-{scenario.name}")
    result = outcome(scenario, stub)
    assert (result["status"], result["output"]) == EXPECTED[scenario.name], result["events"]


def test_every_scenario_has_an_expectation():
    assert {s.name for s in SCENARIOS} == set(EXPECTED)
