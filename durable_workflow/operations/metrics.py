"""The operator metrics snapshot: durable facts for dashboards, not a Prometheus scrape.

Every number is read from the database in a handful of aggregate queries, so
the snapshot costs the same whatever the history size.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.db.models import Count, Max, Q

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityAttempt,
    ActivityExecution,
    ActivityStatus,
    AttemptStatus,
    CommandType,
    RunStatus,
    Task,
    TaskStatus,
    WorkerRegistration,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowRun,
)
from durable_workflow.operations import queries
from durable_workflow.operations.queues import effective_queue
from durable_workflow.operations.sticky_metrics import sticky_execution
from durable_workflow.operations.topology import matching_role

SCHEMA = "durable-workflow.operator-metrics"
SCHEMA_VERSION = 1
HISTORY_EVENT_BUDGET = 10_000
HISTORY_SIZE_BUDGET = 5 * 1024 * 1024


def _runs() -> dict[str, Any]:
    by_status = {status: 0 for status in RunStatus.values}
    archived = 0
    rows = WorkflowRun.objects.values("status").annotate(
        n=Count("id"), archived=Count("id", filter=Q(archived_at__isnull=False))
    )
    for row in rows.order_by():
        by_status[row["status"]] = row["n"]
        archived += row["archived"]
    open_count = sum(n for s, n in by_status.items() if s not in TERMINAL_RUN_STATUSES)
    return {
        "by_status": by_status,
        "open": open_count,
        "closed": sum(by_status.values()) - open_count,
        "archived": archived,
    }


def _task_scope(row: Mapping[str, Any]) -> tuple[str | None, str]:
    try:
        return row["connection"], effective_queue(row["queue"], row["connection"], row["task_type"])
    except Exception:  # an unloadable connection still deserves a row
        return row["connection"], row["queue"] or "default"


def queues(now: dt.datetime) -> list[dict[str, Any]]:
    """Per-queue backlog, leases, repair pressure and flow, split by task type."""
    scopes: dict[tuple[str | None, str], dict[str, Any]] = {}
    for row in queries.queue_rows(now):
        scope = _task_scope(row)
        entry = scopes.setdefault(
            scope,
            {
                "connection": scope[0],
                "queue": scope[1],
                "ready": 0,
                "delayed": 0,
                "leased": 0,
                "expired_leases": 0,
                "dispatch_overdue": 0,
                "tasks_added_last_minute": 0,
                "tasks_dispatched_last_minute": 0,
                "oldest_ready_due_at": None,
                "oldest_lease_expired_at": None,
                "oldest_dispatch_overdue_since": None,
                "by_task_type": defaultdict(dict),
            },
        )
        for key, column in (
            ("ready", "ready"),
            ("delayed", "delayed"),
            ("leased", "leased"),
            ("expired_leases", "expired_leases"),
            ("dispatch_overdue", "dispatch_overdue"),
            ("tasks_added_last_minute", "added_last_minute"),
            ("tasks_dispatched_last_minute", "dispatched_last_minute"),
        ):
            entry[key] += row[column]
        for key, column in (
            ("oldest_ready_due_at", "oldest_ready"),
            ("oldest_lease_expired_at", "oldest_expired"),
            ("oldest_dispatch_overdue_since", "oldest_overdue"),
        ):
            if row[column] and (entry[key] is None or row[column] < entry[key]):
                entry[key] = row[column]
        entry["by_task_type"][row["task_type"]] = {
            "ready": row["ready"],
            "delayed": row["delayed"],
            "leased": row["leased"],
            "expired_leases": row["expired_leases"],
        }
    out = []
    for entry in scopes.values():
        entry["max_ready_due_age_ms"] = queries.age_ms(now, entry["oldest_ready_due_at"])
        entry["max_lease_expired_age_ms"] = queries.age_ms(now, entry["oldest_lease_expired_at"])
        entry["max_dispatch_overdue_age_ms"] = queries.age_ms(
            now, entry["oldest_dispatch_overdue_since"]
        )
        for key in (
            "oldest_ready_due_at",
            "oldest_lease_expired_at",
            "oldest_dispatch_overdue_since",
        ):
            entry[key] = queries.iso(entry[key])
        entry["by_task_type"] = dict(entry["by_task_type"])
        out.append(entry)
    return sorted(out, key=lambda e: (e["connection"] or "", e["queue"]))


def _backlog(
    per_queue: list[dict[str, Any]], *, repair_needed: int, retrying: int
) -> dict[str, Any]:
    def total(key: str) -> int:
        return sum(q[key] for q in per_queue)

    return {
        "runnable_tasks": total("ready"),
        "delayed_tasks": total("delayed"),
        "leased_tasks": total("leased"),
        "unhealthy_tasks": total("expired_leases") + total("dispatch_overdue"),
        "repair_needed_runs": repair_needed,
        "retrying_activities": retrying,
        "tasks_added_last_minute": total("tasks_added_last_minute"),
        "tasks_dispatched_last_minute": total("tasks_dispatched_last_minute"),
    }


def _oldest(per_queue: list[dict[str, Any]], key: str) -> str | None:
    values = [q[key] for q in per_queue if q[key]]
    return min(values) if values else None


def _tasks(now: dt.datetime, per_queue: list[dict[str, Any]]) -> dict[str, Any]:
    oldest_ready = _oldest(per_queue, "oldest_ready_due_at")
    oldest_overdue = _oldest(per_queue, "oldest_dispatch_overdue_since")
    oldest_expired = _oldest(per_queue, "oldest_lease_expired_at")

    def age(value: str | None) -> int | None:
        return queries.age_ms(now, dt.datetime.fromisoformat(value)) if value else None

    return {
        "oldest_ready_due_at": oldest_ready,
        "max_ready_due_age_ms": age(oldest_ready),
        "dispatch_overdue": sum(q["dispatch_overdue"] for q in per_queue),
        "oldest_dispatch_overdue_since": oldest_overdue,
        "max_dispatch_overdue_age_ms": age(oldest_overdue),
        "expired_leases": sum(q["expired_leases"] for q in per_queue),
        "oldest_lease_expired_at": oldest_expired,
        "max_lease_expired_age_ms": age(oldest_expired),
        "failed_last_day": Task.objects.filter(
            status=TaskStatus.FAILED, updated_at__gte=now - dt.timedelta(days=1)
        ).count(),
    }


def _repair(now: dt.datetime) -> dict[str, Any]:
    settings = get_settings()
    commands = WorkflowCommand.objects.filter(command_type=CommandType.REPAIR)
    day_ago = now - dt.timedelta(days=1)
    outcomes: dict[str, int] = {}
    recent: dict[str, int] = {}
    for row in (
        commands.values("outcome")
        .annotate(n=Count("id"), recent=Count("id", filter=Q(created_at__gte=day_ago)))
        .order_by()
    ):
        outcomes[row["outcome"]] = row["n"]
        recent[row["outcome"]] = row["recent"]
    return {
        "commands_by_outcome": outcomes,
        "commands_last_day_by_outcome": recent,
        "policy": {
            "redispatch_after_seconds": settings.REDISPATCH_AFTER_SECONDS,
            "redispatch_max_backoff_seconds": settings.REDISPATCH_MAX_BACKOFF_SECONDS,
            "scan_limit": settings.REPAIR_SCAN_LIMIT,
            "interval_seconds": settings.REPAIR_INTERVAL_SECONDS,
        },
    }


def _failures(now: dt.datetime) -> dict[str, Any]:
    day_ago = now - dt.timedelta(days=1)
    by_category = {
        row["failure_category"]: row["n"]
        for row in WorkflowFailure.objects.values("failure_category")
        .annotate(n=Count("id"))
        .order_by()
    }
    by_type = [
        {
            "exception_type": row["exception_type"],
            "failure_category": row["failure_category"],
            "count": row["n"],
            "last_day": row["recent"],
            "last_seen_at": queries.iso(row["last"]),
        }
        for row in WorkflowFailure.objects.values("exception_type", "failure_category")
        .annotate(
            n=Count("id"),
            recent=Count("id", filter=Q(created_at__gte=day_ago)),
            last=Max("created_at"),
        )
        .order_by("-n", "exception_type")[:25]
    ]
    return {
        "total": sum(by_category.values()),
        "last_day": WorkflowFailure.objects.filter(created_at__gte=day_ago).count(),
        "by_category": by_category,
        "by_exception_type": by_type,
    }


def _history() -> dict[str, Any]:
    stats = queries.open_runs().aggregate(
        max_events=Max("next_sequence"),
        max_size=Max("history_size_bytes"),
        over_budget=Count(
            "id",
            filter=Q(next_sequence__gt=HISTORY_EVENT_BUDGET)
            | Q(history_size_bytes__gte=HISTORY_SIZE_BUDGET),
        ),
    )
    return {
        "max_open_run_event_count": max((stats["max_events"] or 1) - 1, 0),
        "max_open_run_size_bytes": stats["max_size"] or 0,
        "continue_as_new_recommended": stats["over_budget"],
        "event_budget": HISTORY_EVENT_BUDGET,
        "size_budget_bytes": HISTORY_SIZE_BUDGET,
    }


def _activities() -> dict[str, Any]:
    stats = ActivityExecution.objects.filter(
        status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    ).aggregate(
        pending=Count("id", filter=Q(status=ActivityStatus.PENDING)),
        running=Count("id", filter=Q(status=ActivityStatus.RUNNING)),
        retrying=Count("id", filter=Q(status=ActivityStatus.PENDING, attempt_count__gt=0)),
    )
    failed_attempts = ActivityAttempt.objects.filter(
        status__in=(AttemptStatus.FAILED, AttemptStatus.EXPIRED)
    ).count()
    return {
        "pending": stats["pending"],
        "running": stats["running"],
        "retrying": stats["retrying"],
        "failed_attempts": failed_attempts,
    }


def workers(now: dt.datetime) -> dict[str, Any]:
    """Registered worker processes: live ones, stale ones, and who serves which queue."""
    stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
    cutoff = now - dt.timedelta(seconds=stale_after)
    fleet: list[dict[str, Any]] = [
        {
            "worker_id": row["worker_id"],
            "hostname": row["hostname"],
            "queues": list(row["queues"] or []),
            "capabilities": list(row["capabilities"] or []),
            "live": row["last_heartbeat_at"] >= cutoff,
            "last_heartbeat_at": queries.iso(row["last_heartbeat_at"]),
        }
        for row in WorkerRegistration.objects.filter(status="active")
        .order_by("worker_id")
        .values("worker_id", "hostname", "queues", "capabilities", "last_heartbeat_at")[:500]
    ]
    live = [w for w in fleet if w["live"]]
    return {
        "active_workers": len(live),
        "stale_workers": len(fleet) - len(live),
        "active_worker_scopes": len({q for w in live for q in w["queues"]}),
        "stale_after_seconds": stale_after,
        "fleet": fleet,
    }


def pollers(fleet: dict[str, Any], queue: str) -> dict[str, int]:
    serving = [w for w in fleet["fleet"] if queue in w["queues"]]
    live = sum(1 for w in serving if w["live"])
    return {
        "active_count": live,
        "stale_count": len(serving) - live,
        "stale_after_seconds": fleet["stale_after_seconds"],
    }


def operator_metrics(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """The snapshot (``durable_workflow/schemas/operator-metrics.schema.json``)."""
    now = now or clock.now()
    per_queue = queues(now)
    repair_needed = len(queries.parked_run_ids()) + queries.runs_missing_their_task().count()
    activities = _activities()
    fleet = workers(now)
    for entry in per_queue:
        entry["pollers"] = pollers(fleet, entry["queue"])
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "generated_at": now.isoformat(),
        "runs": _runs(),
        "backlog": _backlog(
            per_queue, repair_needed=repair_needed, retrying=activities["retrying"]
        ),
        "tasks": _tasks(now, per_queue),
        "queues": per_queue,
        "activities": activities,
        "repair": _repair(now),
        "failures": _failures(now),
        "history": _history(),
        "workers": fleet,
        "worker_sessions": _worker_sessions(),
        "sticky_execution": sticky_execution(now),
        "matching_role": matching_role(),
    }


def _worker_sessions() -> dict[str, int]:
    """Sessions per status, and the in-session steps waiting after a refusal (with the
    messages they have had: many per task means steps wait long for a session)."""
    from durable_workflow.executor import session_documents, sessions
    from durable_workflow.store import sessions as session_store

    sessions.refresh_all()
    waiting = session_store.refused_and_waiting()
    return {
        **session_documents.metrics(),
        "refused_waiting_tasks": waiting["tasks"],
        "refused_waiting_messages": waiting["messages"],
    }
