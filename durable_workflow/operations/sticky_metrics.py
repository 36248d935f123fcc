"""The ``sticky_execution`` block of the operator metrics: owners, claims, cache pressure."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, Q

from durable_workflow.conf import get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    Task,
    TaskStatus,
    TaskType,
    WorkerRegistration,
    WorkflowRun,
)

MODES = ("sticky_hit_expected", "cold_replay", "forced_cold_replay")


def sticky_execution(now: dt.datetime) -> dict[str, Any]:
    """Affinity held now, and how the last minute's workflow-task claims replayed."""
    owned = Q(sticky_worker_id__isnull=False, sticky_until__gt=now)
    active_runs = WorkflowRun.objects.filter(owned).exclude(status__in=TERMINAL_RUN_STATUSES)
    # Only ready and leased tasks are counted: saying so lets PostgreSQL read them through
    # a status index instead of every task ever written (6 s at a million runs).
    open_tasks = Task.objects.filter(status__in=(TaskStatus.READY, TaskStatus.LEASED))
    tasks = open_tasks.filter(owned, task_type=TaskType.WORKFLOW).aggregate(
        ready=Count("id", filter=Q(status=TaskStatus.READY)),
        leased=Count("id", filter=Q(status=TaskStatus.LEASED)),
    )
    claims = {mode: 0 for mode in MODES}
    recent = (
        Task.objects.filter(
            task_type=TaskType.WORKFLOW, sticky_claimed_at__gte=now - dt.timedelta(minutes=1)
        )
        .values("sticky_replay_mode")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in recent:
        mode = row["sticky_replay_mode"]
        if mode is not None:  # a claimed task always records its mode (store.tasks)
            claims[mode] = row["n"]
    total = sum(claims.values())
    misses = claims["cold_replay"] + claims["forced_cold_replay"]
    pressured = _pressured_workers(now)
    return {
        "enabled": get_settings().STICKY_ENABLED,
        "ttl_seconds": get_settings().STICKY_TTL_SECONDS,
        "active_sticky_runs": active_runs.count(),
        "ready_sticky_tasks": tasks["ready"],
        "leased_sticky_tasks": tasks["leased"],
        "hit_expected_last_minute": claims["sticky_hit_expected"],
        "miss_last_minute": misses,
        "forced_cold_replay_last_minute": claims["forced_cold_replay"],
        "cold_replay_last_minute": claims["cold_replay"],
        "hit_rate_last_minute": round(claims["sticky_hit_expected"] / total, 4) if total else None,
        "miss_rate_last_minute": round(misses / total, 4) if total else None,
        "capacity_pressure_tasks": (
            Task.objects.filter(owned, task_type=TaskType.WORKFLOW, status=TaskStatus.READY)
            .filter(sticky_worker_id__in=pressured)
            .count()
            if pressured
            else 0
        ),
        "capacity_pressure_workers": len(pressured),
    }


def _pressured_workers(now: dt.datetime) -> list[str]:
    """Live workers whose reported cache is full: they evict warm bodies."""
    cutoff = now - dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
    rows = WorkerRegistration.objects.filter(status="active", last_heartbeat_at__gte=cutoff)
    full = []
    for worker_id, cache in rows.values_list("worker_id", "sticky_cache")[:500]:
        capacity = (cache or {}).get("capacity") or 0
        if capacity and (cache or {}).get("size", 0) >= capacity:
            full.append(worker_id)
    return full
