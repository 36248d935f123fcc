"""Sticky routing with two real workers: each run's workflow tasks stay where it is warm."""

from __future__ import annotations

from collections import Counter

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import Task, WorkerRegistration
from tests.acceptance.conftest import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 6
STEPS = 15


def test_two_workers_keep_a_steady_sticky_hit_rate(start_worker, monkeypatch):
    monkeypatch.setenv("DW_WORKER_HEARTBEAT_SECONDS", "0.5")
    # Activities published, not run by the workflow's worker, so they land on both.
    start_worker(env={"DW_EAGER_ACTIVITIES": "0"})
    start_worker(env={"DW_EAGER_ACTIVITIES": "0"})
    wait_for(
        lambda: WorkerRegistration.objects.filter(status="active").count() == 2,
        timeout=20,
        message="workers did not register",
    )
    stubs = []
    for index in range(RUNS):
        stub = WorkflowStub.make("tests.many-steps", f"sticky-{index}")
        stub.start(STEPS)
        stubs.append(stub)
    for stub in stubs:
        stub.wait(timeout=120)
        assert stub.refresh().output() == sum(range(STEPS))

    workflow_tasks = Task.objects.filter(task_type="workflow", status="completed")
    modes = Counter(workflow_tasks.values_list("sticky_replay_mode", flat=True))
    assert sum(modes.values()) == RUNS * (STEPS + 1)
    assert modes["cold_replay"] == RUNS  # only each run's first task had no owner yet
    assert modes["sticky_hit_expected"] / sum(modes.values()) > 0.9, modes

    # Activities went to both workers, yet each run's later workflow tasks stayed put.
    activity_owners = set(
        Task.objects.filter(task_type="activity").values_list("lease_owner", flat=True)
    )
    assert len(activity_owners) == 2
    for stub in stubs:
        owners = set(
            workflow_tasks.filter(run_id=stub.run_id())
            .exclude(sticky_replay_mode="cold_replay")
            .values_list("lease_owner", flat=True)
        )
        assert len(owners) == 1

    # The caches agree: the bodies really were resumed warm, not replayed.
    def reported() -> Counter:
        total: Counter = Counter()
        for row in WorkerRegistration.objects.filter(status="active"):
            total.update({k: row.sticky_cache.get(k, 0) for k in ("hits", "forced_cold")})
        return total

    wait_for(
        lambda: reported()["hits"] >= modes["sticky_hit_expected"] * 0.95,
        timeout=10,
        message=f"cache hits {reported()} for {modes}",
    )
    stats = reported()
    assert stats["hits"] / (stats["hits"] + stats["forced_cold"] + RUNS) > 0.9
