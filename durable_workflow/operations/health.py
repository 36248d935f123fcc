"""The health snapshot: fast doctor checks plus queue visibility, for a readiness probe.

``status`` is the worst check: ``error`` is blocking (the view answers 503),
``warning`` is advisory, ``ok`` means ready. Worker inspection is left out
(it costs a broker round trip of a second); the doctor runs it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock
from durable_workflow.operations import metrics
from durable_workflow.operations.doctor import FAST_CHECK_IDS, DoctorContext, run_checks
from durable_workflow.operations.doctor.result import OK, worst

SCHEMA = "durable-workflow.health"
SCHEMA_VERSION = 1
CATEGORIES = ("correctness", "acceleration")


def _queue_visibility(now: dt.datetime) -> dict[str, Any]:
    try:
        per_queue = metrics.queues(now)
        fleet = metrics.workers(now)
    except Exception as exc:
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}", "task_queues": []}
    task_queues = [
        {
            "connection": q["connection"],
            "queue": q["queue"],
            "stats": {
                "approximate_backlog_count": q["ready"],
                "approximate_backlog_age_ms": q["max_ready_due_age_ms"],
                "tasks_added_last_minute": q["tasks_added_last_minute"],
                "tasks_dispatched_last_minute": q["tasks_dispatched_last_minute"],
                "pollers": metrics.pollers(fleet, q["queue"]),
                **{f"{kind}_tasks": counts for kind, counts in q["by_task_type"].items()},
            },
            "repair": {
                "candidates": q["expired_leases"] + q["dispatch_overdue"],
                "expired_leases": q["expired_leases"],
                "dispatch_overdue": q["dispatch_overdue"],
                "oldest_lease_expired_at": q["oldest_lease_expired_at"],
                "max_lease_expired_age_ms": q["max_lease_expired_age_ms"],
                "oldest_dispatch_overdue_since": q["oldest_dispatch_overdue_since"],
                "max_dispatch_overdue_age_ms": q["max_dispatch_overdue_age_ms"],
            },
        }
        for q in per_queue
    ]
    return {"available": True, "reason": None, "task_queues": task_queues}


def _alerts(checks: list[dict[str, Any]], visibility: dict[str, Any]) -> list[dict[str, Any]]:
    alerts = [
        {"source": "check", "id": c["id"], "status": c["status"], "message": c["message"]}
        for c in checks
        if c["status"] != OK
    ]
    for queue in visibility["task_queues"]:
        stats, repair = queue["stats"], queue["repair"]
        if stats["approximate_backlog_count"] and not stats["pollers"]["active_count"]:
            alerts.append(
                {
                    "source": "queue",
                    "id": queue["queue"],
                    "status": "warning",
                    "message": f"{stats['approximate_backlog_count']} ready task(s) on "
                    f"{queue['queue']} and no registered worker polls it",
                }
            )
        if repair["candidates"]:
            alerts.append(
                {
                    "source": "queue",
                    "id": queue["queue"],
                    "status": "warning",
                    "message": f"{repair['expired_leases']} expired lease(s) and "
                    f"{repair['dispatch_overdue']} overdue dispatch(es) on {queue['queue']}",
                }
            )
    return alerts


def health(
    *, now: dt.datetime | None = None, include_broker: bool = True
) -> tuple[dict[str, Any], int]:
    """(snapshot, HTTP status): 503 when a blocking check fails."""
    now = now or clock.now()
    only = (*FAST_CHECK_IDS, "celery_app", "broker") if include_broker else FAST_CHECK_IDS
    results = run_checks(DoctorContext(now=now), only=only)
    checks = [r.as_dict() for r in results]
    categories = {
        name: {
            "status": worst(tuple(r.status for r in results if r.category == name)),
            "check_count": sum(1 for r in results if r.category == name),
        }
        for name in CATEGORIES
    }
    visibility = _queue_visibility(now)
    status = worst(tuple(r.status for r in results))
    snapshot = {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "generated_at": now.isoformat(),
        "status": status,
        "engine_source": "embedded",
        "readiness_contract": {"blocking": "error", "advisory": "warning"},
        "checks": checks,
        "categories": categories,
        "queue_visibility": visibility,
        "coordination_alerts": _alerts(checks, visibility),
    }
    return snapshot, 503 if status == "error" else 200
