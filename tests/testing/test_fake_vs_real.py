"""Fake mode and a real worker agree: same outputs, same history event types, same order.

The scenario suite runs first in fake mode (inline, engine clock moved by
travel), then against a ``celery worker`` subprocess on PostgreSQL + Redis
(real sleeps). Heartbeats and timing are the only things allowed to differ.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.models import Task
from tests.acceptance.conftest import broker, start_worker  # noqa: F401  (fixtures)
from tests.testing.scenarios import SCENARIOS, FakeDriver, outcome

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


class WorkerDriver:
    """A real worker does the work; the test waits until nothing is ready or running."""

    def __init__(self, worker: Any, timeout: float = 60.0) -> None:
        self.worker = worker
        self.timeout = timeout

    def start(self, workflow: str, instance_id: str, *args: Any) -> WorkflowStub:
        stub = WorkflowStub.make(workflow, instance_id)
        stub.start(*args)
        self.settle()
        return stub

    def settle(self) -> None:
        deadline = time.monotonic() + self.timeout
        quiet = 0
        while quiet < 3:  # quiescent on three polls in a row
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the worker did not settle; open tasks:\n{_open_tasks()}\n"
                    f"worker log (tail):\n{self.worker.output()[-4000:]}"
                )
            quiet = quiet + 1 if not _busy() else 0
            time.sleep(0.05)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
        self.settle()


def _busy() -> bool:
    return (
        Task.objects.filter(status="leased").exists()
        or Task.objects.filter(status="ready", available_at__lte=clock.now()).exists()
    )


def _open_tasks() -> str:
    rows = Task.objects.filter(status__in=("ready", "leased")).values_list(
        "task_type", "status", "available_at", "run__instance_id"
    )
    return "\n".join(str(row) for row in rows)


@pytest.mark.slow  # every scenario again on a real worker, with real sleeps: make test-all
def test_fake_mode_and_a_real_worker_agree(start_worker):  # noqa: F811
    faked = {}
    with WorkflowStub.fake():
        for scenario in SCENARIOS:
            stub = scenario.run(FakeDriver(), f"fake-{scenario.name}")
            faked[scenario.name] = outcome(scenario, stub)
    clock.reset()

    driver = WorkerDriver(start_worker(beat=False))
    real = {}
    for scenario in SCENARIOS:
        stub = scenario.run(driver, f"real-{scenario.name}")
        real[scenario.name] = outcome(scenario, stub)

    differences = {
        name: {"fake": faked[name], "real": real[name]}
        for name in faked
        if faked[name] != real[name]
    }
    assert not differences, json.dumps(differences, indent=1, default=str)
    assert all(result["status"] != "running" for result in real.values())
