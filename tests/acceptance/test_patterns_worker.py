"""Issue 21's patterns through a real Celery worker: the same outcome as in fake mode.

``test_fake_vs_real`` (``make test-all``) runs every scenario both ways; this runs
the patterns' ones on every ``make test``.
"""

from __future__ import annotations

import json

import pytest

from durable_workflow import WorkflowStub, clock
from tests.acceptance.conftest import broker, start_worker  # noqa: F401  (fixtures)
from tests.testing.pattern_scenarios import scenarios
from tests.testing.scenarios import FakeDriver, outcome
from tests.testing.test_fake_vs_real import WorkerDriver

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_patterns_agree_in_fake_mode_and_on_a_real_worker(start_worker):  # noqa: F811
    faked = {}
    with WorkflowStub.fake():
        for scenario in scenarios():
            stub = scenario.run(FakeDriver(), f"fake-{scenario.name}")
            faked[scenario.name] = outcome(scenario, stub)
    clock.reset()

    driver = WorkerDriver(start_worker(beat=False))
    real = {}
    for scenario in scenarios():
        stub = scenario.run(driver, f"real-{scenario.name}")
        real[scenario.name] = outcome(scenario, stub)

    differences = {
        name: {"fake": faked[name], "real": real[name]}
        for name in faked
        if faked[name] != real[name]
    }
    assert not differences, json.dumps(differences, indent=1, default=str)
    assert all(result["status"] == "completed" for result in real.values()), real
