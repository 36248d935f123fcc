"""A prefork worker's metrics, written under PROMETHEUS_MULTIPROC_DIR, read by the scrape
view in this process (issue 25, item 2)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from durable_workflow import WorkflowStub

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

TOKEN = "acceptance-scrape-token"


def test_the_view_reads_what_a_prefork_workers_children_counted(
    start_worker, tmp_path, monkeypatch, settings, client
):
    directory = tmp_path / "prometheus"
    directory.mkdir()
    worker = start_worker(
        pool="prefork",
        env={
            "PROMETHEUS_MULTIPROC_DIR": str(directory),
            "DW_EXTRA_SETTINGS_JSON": json.dumps({"PROMETHEUS_METRICS": True}),
        },
    )
    retried = WorkflowStub.make("tests.retrying", "prom-worker-retry")
    retried.start(2)  # its first attempt fails, the second succeeds
    refused = WorkflowStub.make("tests.non-retryable", "prom-worker-refused")
    refused.start()
    retried.wait(timeout=60)
    refused.wait(timeout=60)
    assert retried.completed() and refused.failed()
    worker.stop()  # each pool child exits through worker_process_shutdown

    # Files of the main process and of the pool child that ran the tasks.
    pids = {path.stem.rsplit("_", 1)[1] for path in directory.glob("*.db")}
    assert str(worker.process.pid) in pids and len(pids) >= 2

    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "PROMETHEUS_SCRAPE_TOKEN": TOKEN}
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    response = client.get("/metrics/", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    closed = "durable_workflow_workflow_closed_total"
    assert value(closed, workflow_type="tests.retrying", status="completed") == 1
    assert value(closed, workflow_type="tests.non-retryable", status="failed") == 1
    flaky = {"activity_type": "tests.flaky", "queue": "celery"}
    attempts = "durable_workflow_activity_attempts_total"
    assert value(attempts, **flaky, outcome="failed") == 1
    assert value(attempts, **flaky, outcome="completed") == 1
    assert value("durable_workflow_activity_attempt_duration_seconds_count", **flaky) == 2
    refuse = {"activity_type": "tests.refuse", "queue": "celery", "category": "activity"}
    assert value("durable_workflow_activity_failed_total", **refuse) == 1
    task_seconds = "durable_workflow_workflow_task_duration_seconds_count"
    for workflow_type in ("tests.retrying", "tests.non-retryable"):
        assert value(task_seconds, workflow_type=workflow_type, outcome="completed") >= 1
    assert value("durable_workflow_database_collector_up") == 1
