"""Worker registration rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from django.db.models import Count, Max, Q

from durable_workflow.models import WorkerRegistration


def register(
    *,
    worker_id: str,
    hostname: str,
    pid: int,
    queues: list[str],
    capabilities: list[str],
    max_concurrent_worker_sessions: int,
    sticky_cache: dict[str, Any],
    now: dt.datetime,
    direct_queue: str | None = None,
    compatibility: list[str] | None = None,
) -> None:
    WorkerRegistration.objects.update_or_create(
        worker_id=worker_id,
        defaults={
            "compatibility": compatibility or [],
            "direct_queue": direct_queue,
            "hostname": hostname,
            "pid": pid,
            "queues": queues,
            "capabilities": capabilities,
            "max_concurrent_worker_sessions": max_concurrent_worker_sessions,
            "sticky_cache": sticky_cache,
            "status": "active",
            "started_at": now,
            "last_heartbeat_at": now,
            "stopped_at": None,
        },
    )


def heartbeat(
    worker_id: str,
    *,
    sticky_cache: dict[str, Any],
    now: dt.datetime,
    failing_since: dt.datetime | None = None,
) -> bool:
    return bool(
        WorkerRegistration.objects.filter(worker_id=worker_id, status="active").update(
            last_heartbeat_at=now, sticky_cache=sticky_cache, failing_since=failing_since
        )
    )


def deregister(worker_id: str, *, now: dt.datetime) -> None:
    WorkerRegistration.objects.filter(worker_id=worker_id).update(status="stopped", stopped_at=now)


def live(*, now: dt.datetime, stale_after: int) -> list[dict[str, Any]]:
    """Registrations that heartbeat within ``stale_after`` seconds."""
    cutoff = now - dt.timedelta(seconds=stale_after)
    rows = WorkerRegistration.objects.filter(status="active", last_heartbeat_at__gte=cutoff)
    return [dict(row) for row in rows.values()]


def get(worker_id: str) -> dict[str, Any] | None:
    row = WorkerRegistration.objects.filter(worker_id=worker_id).values().first()
    return None if row is None else dict(row)


def get_many(worker_ids: set[str]) -> dict[str, dict[str, Any]]:
    rows = WorkerRegistration.objects.filter(worker_id__in=worker_ids).values()
    return {row["worker_id"]: dict(row) for row in rows}


def is_live(row: dict[str, Any] | None, *, now: dt.datetime, stale_after: int) -> bool:
    """The rule ``live()`` applies in SQL, for a row already read."""
    if row is None or row["status"] != "active":
        return False
    return bool(row["last_heartbeat_at"] >= now - dt.timedelta(seconds=stale_after))


def is_routable(row: dict[str, Any] | None, *, now: dt.datetime, stale_after: int) -> bool:
    """May work be sent to this worker alone (its direct queue)? Live, and its tasks do
    not keep failing on infrastructure errors: a heartbeat only says a thread can
    write, not that the process does work."""
    return is_live(row, now=now, stale_after=stale_after) and not (row or {}).get("failing_since")


@dataclasses.dataclass(frozen=True)
class Liveness:
    """The registrations at one moment, as the repair pass weighs held messages."""

    #: Registrations that heartbeat within the staleness period and report their
    #: tasks getting done.
    healthy: int
    #: Registrations that heartbeat but whose tasks keep failing (``failing_since``).
    failing: int
    #: The latest last heartbeat of the registrations gone silent without
    #: deregistering (a worker killed or cut off); ``None`` when none did.
    last_silent_beat: dt.datetime | None


def liveness(*, now: dt.datetime, stale_after: int) -> Liveness:
    """Count the live registrations and date the silent ones, in one query."""
    live = Q(last_heartbeat_at__gte=now - dt.timedelta(seconds=stale_after))
    row = WorkerRegistration.objects.filter(status="active").aggregate(
        healthy=Count("pk", filter=live & Q(failing_since__isnull=True)),
        failing=Count("pk", filter=live & Q(failing_since__isnull=False)),
        beat=Max("last_heartbeat_at", filter=~live),
    )
    return Liveness(healthy=row["healthy"], failing=row["failing"], last_silent_beat=row["beat"])
