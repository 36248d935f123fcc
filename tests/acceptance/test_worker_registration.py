"""Worker processes register, heartbeat and deregister (real Celery workers)."""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import Task, WorkerRegistration
from tests.acceptance.conftest import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_a_worker_registers_heartbeats_and_deregisters(start_worker, monkeypatch):
    monkeypatch.setenv("DW_WORKER_CAPABILITIES", "gpu:nvidia-l4,zone:test")
    monkeypatch.setenv("DW_WORKER_HEARTBEAT_SECONDS", "0.5")
    worker = start_worker(queues="celery,reports")
    wait_for(lambda: WorkerRegistration.objects.exists(), timeout=20, message="no registration")
    row = WorkerRegistration.objects.get()
    assert row.status == "active" and row.pid == worker.process.pid
    assert row.queues == ["celery", "reports"]
    assert row.capabilities == ["gpu:nvidia-l4", "zone:test"]
    first_beat = row.last_heartbeat_at
    wait_for(
        lambda: WorkerRegistration.objects.get().last_heartbeat_at > first_beat,
        timeout=10,
        message="no heartbeat",
    )
    stub = WorkflowStub.make("tests.sequential", "registered-1")
    stub.start("ada")
    stub.wait(timeout=30)
    owners = set(Task.objects.filter(run_id=stub.run_id()).values_list("lease_owner", flat=True))
    assert owners == {row.worker_id}
    assert WorkerRegistration.objects.get().sticky_cache["enabled"] is True
    worker.stop()  # warm shutdown
    row.refresh_from_db()
    assert row.status == "stopped" and row.stopped_at is not None
