"""Operator metrics snapshot and health view (mounted from ``durable_workflow.ops_urls``)."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from durable_workflow import clock
from durable_workflow.models import Task
from durable_workflow.operations import schemas
from durable_workflow.operations.health import health
from durable_workflow.operations.metrics import operator_metrics
from tests.conftest import require_redis
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(client):
    user = User.objects.create_user("ops", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client.force_login(user)
    return client


def test_metrics_snapshot_counts_runs_queues_repairs_and_failures(inline):
    done = start("tests.catch-failure", "metrics-done")
    inline.run()
    assert done.refresh().completed()
    waiting = start("tests.approval", "metrics-repair", "signal")
    inline.run()
    assert waiting.repair(reason="checking").outcome == "repair_not_needed"  # healthy, waiting
    start("tests.sequential", "metrics-waiting", "ada")
    other = start("tests.sequential", "metrics-payments", "bob")
    Task.objects.filter(run_id=other.run_id()).update(queue="payments")
    clock.advance(dt.timedelta(seconds=30))

    snapshot = operator_metrics()
    schemas.validate(snapshot, schemas.OPERATOR_METRICS)
    assert snapshot["runs"]["by_status"]["completed"] == 1
    assert snapshot["runs"]["open"] == 3
    assert snapshot["runs"]["archived"] == 0
    done.archive("metrics")
    assert operator_metrics()["runs"]["archived"] == 1  # still counted closed, by status
    queues = {q["queue"]: q for q in snapshot["queues"]}
    assert queues["payments"]["ready"] == 1
    assert queues["payments"]["by_task_type"]["workflow"]["ready"] == 1
    assert queues["celery"]["ready"] >= 1
    assert queues["payments"]["max_ready_due_age_ms"] >= 30_000
    assert snapshot["backlog"]["runnable_tasks"] == sum(q["ready"] for q in snapshot["queues"])
    assert snapshot["tasks"]["max_ready_due_age_ms"] >= 30_000
    assert snapshot["repair"]["commands_by_outcome"] == {"repair_not_needed": 1}
    failures = snapshot["failures"]
    assert failures["total"] == 1
    assert failures["by_exception_type"][0]["count"] == 1
    assert failures["by_category"] == {"activity": 1}


def test_metrics_view_requires_permission(client, operator, inline):
    url = reverse("durable_workflow_ops:metrics")
    anonymous = type(client)()
    assert anonymous.get(url).status_code == 401
    nobody = type(client)()
    nobody.force_login(User.objects.create_user("nobody", password="x"))
    denied = nobody.get(url)
    assert denied.status_code == 403
    assert denied.json()["reason"] == "permission_denied"
    response = operator.get(url)
    assert response.status_code == 200
    schemas.validate(response.json(), schemas.OPERATOR_METRICS)


def test_health_is_ok_then_503_when_a_blocking_check_fails(operator, inline, monkeypatch):
    require_redis()
    url = reverse("durable_workflow_ops:health")
    response = operator.get(url)
    body = response.json()
    schemas.validate(body, schemas.HEALTH)
    assert response.status_code == 200, body
    assert body["status"] in ("ok", "warning")
    assert body["categories"]["correctness"]["check_count"] == len(body["checks"])
    assert body["categories"]["acceleration"]["check_count"] == 0

    from tests.celery_app import app

    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    down = operator.get(url)
    assert down.status_code == 503
    body = down.json()
    schemas.validate(body, schemas.HEALTH)
    assert body["status"] == "error"
    assert any(a["id"] == "broker" and a["status"] == "error" for a in body["coordination_alerts"])
    assert operator.get(url, {"broker": "0"}).status_code == 200


def test_health_reports_queue_pressure(inline):
    stub = start("tests.sequential", "health-queue", "ada")
    Task.objects.filter(run_id=stub.run_id()).update(queue="slow")
    clock.advance(dt.timedelta(minutes=10))
    snapshot, status = health(include_broker=False)
    schemas.validate(snapshot, schemas.HEALTH)
    assert status == 200
    assert snapshot["status"] == "warning"  # stuck ready task
    queue = next(q for q in snapshot["queue_visibility"]["task_queues"] if q["queue"] == "slow")
    assert queue["stats"]["approximate_backlog_count"] == 1
    assert queue["repair"]["dispatch_overdue"] == 1
    sources = {(a["source"], a["id"]) for a in snapshot["coordination_alerts"]}
    assert ("queue", "slow") in sources
    assert ("check", "stuck_tasks") in sources


def test_work_waiting_for_queue_capacity_is_not_dispatch_overdue(inline):
    # It waits on purpose, with no message (a limited queue); one that was sent a
    # message for its slot and not claimed is overdue like any other.
    stub = start("tests.sequential", "health-waiting", "ada")
    Task.objects.filter(run_id=stub.run_id()).update(queue="limited", queue_wait="capacity")
    clock.advance(dt.timedelta(minutes=10))
    snapshot, _ = health(include_broker=False)
    queue = next(q for q in snapshot["queue_visibility"]["task_queues"] if q["queue"] == "limited")
    assert queue["repair"]["dispatch_overdue"] == 0
    Task.objects.filter(run_id=stub.run_id()).update(queue_wait="woken")
    snapshot, _ = health(include_broker=False)
    queue = next(q for q in snapshot["queue_visibility"]["task_queues"] if q["queue"] == "limited")
    assert queue["repair"]["dispatch_overdue"] == 1


def test_history_export_view(operator, inline):
    stub = start("tests.sequential", "view-export", "ada")
    inline.run()
    url = reverse("durable_workflow_ops:history-export", args=["view-export"])
    response = operator.get(url)
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    bundle = json.loads(response.content)
    schemas.validate(bundle, schemas.HISTORY_EXPORT)
    run_url = reverse(
        "durable_workflow_ops:run-history-export", args=["view-export", stub.run_id()]
    )
    assert operator.get(run_url).json()["selected_run"]["run_id"] == stub.run_id()
    missing = reverse("durable_workflow_ops:history-export", args=["nope"])
    assert operator.get(missing).status_code == 404


def test_json_log_lines_carry_run_ids(client, inline):
    import logging

    from durable_workflow.operations.log_format import JsonFormatter

    stub = start("tests.approval", "log-run", "signal")
    inline.run()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("durable_workflow")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        from django.core.management import call_command

        call_command("workflow_repair", "--instance-id", "log-run", stdout=io.StringIO())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    lines = [json.loads(JsonFormatter().format(r)) for r in records]
    [line] = [entry for entry in lines if entry.get("instance_id") == "log-run"]
    assert line["run_id"] == stub.run_id()
    assert line["level"] == "INFO" and line["logger"] == "durable_workflow"
    assert "repair_" in line["message"]


def test_worker_fleet_and_pollers(inline):
    from durable_workflow.models import WorkerRegistration

    stub = start("tests.sequential", "fleet-run", "ada")
    Task.objects.filter(run_id=stub.run_id()).update(queue="payments")
    now = clock.now()
    for worker_id, beat in (("live@a:1", now), ("stale@b:2", now - dt.timedelta(minutes=10))):
        WorkerRegistration.objects.create(
            worker_id=worker_id,
            hostname=worker_id.split("@")[1],
            pid=1,
            queues=["payments"],
            started_at=beat,
            last_heartbeat_at=beat,
        )
    snapshot = operator_metrics()
    schemas.validate(snapshot, schemas.OPERATOR_METRICS)
    assert snapshot["workers"]["active_workers"] == 1
    assert snapshot["workers"]["stale_workers"] == 1
    payments = next(q for q in snapshot["queues"] if q["queue"] == "payments")
    assert payments["pollers"] == {"active_count": 1, "stale_count": 1, "stale_after_seconds": 30}
    WorkerRegistration.objects.filter(worker_id="live@a:1").delete()
    health_snapshot, _ = health(include_broker=False)
    schemas.validate(health_snapshot, schemas.HEALTH)
    alerts = [a["message"] for a in health_snapshot["coordination_alerts"]]
    assert any("no registered worker polls it" in message for message in alerts)
