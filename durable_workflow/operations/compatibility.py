"""Runs waiting for a compatible worker: the view the doctor and the admin share.

A ready task is *waiting for a compatible worker* when its compatibility
marker is supported neither by this process nor by any live worker
registration. Such a run is not stuck and needs no repair: it resumes as soon
as a worker supporting the marker heartbeats (the repair pass keeps re-sending
its message). Everything here only reads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.compatibility import (
    NO_COMPATIBLE_WORKER,
    current_marker,
    local_markers,
    supports,
)
from durable_workflow.conf import get_settings
from durable_workflow.store import compatibility as compat_store
from durable_workflow.store.records import WaitingTask, WorkerMarkers

#: What the admin and the doctor call such a run.
WAITING_LABEL = "waiting for a compatible worker"


@dataclasses.dataclass(frozen=True)
class CompatibilityView:
    current: str | None
    supported: tuple[str, ...]
    fleet: list[WorkerMarkers]
    blocked_markers: tuple[str, ...]
    waiting_count: int
    waiting: list[WaitingTask]

    @property
    def waiting_runs(self) -> list[uuid.UUID]:
        return list(dict.fromkeys(task.run_id for task in self.waiting))

    def as_dict(self) -> dict[str, Any]:
        """The doctor's ``worker_compatibility`` details."""
        return {
            "current": self.current,
            "supported": list(self.supported),
            "fleet": [
                {
                    "worker_id": worker.worker_id,
                    "queues": list(worker.queues),
                    "supported": list(worker.markers),
                    "last_heartbeat_at": worker.last_heartbeat_at.isoformat(),
                }
                for worker in self.fleet
            ],
            "blocked_markers": list(self.blocked_markers),
            "waiting_count": self.waiting_count,
            "waiting": [
                {
                    "instance_id": task.instance_id,
                    "run_id": str(task.run_id),
                    "task_id": str(task.task_id),
                    "task_type": task.task_type,
                    "compatibility": task.compatibility,
                    "queue": task.queue,
                    "connection": task.connection,
                    "available_at": task.available_at.isoformat(),
                    "reason": NO_COMPATIBLE_WORKER,
                }
                for task in self.waiting
            ],
        }


def blocked_markers(
    *, now: dt.datetime, run_id: uuid.UUID | None = None
) -> tuple[tuple[str, ...], list[WorkerMarkers] | None]:
    """Markers of ready tasks that nobody supports, and the fleet (``None``: not read)."""
    local = local_markers()
    foreign = {
        marker
        for marker in compat_store.markers_of_ready_tasks(run_id)
        if not supports(local, marker)
    }
    if not foreign:
        return (), None
    fleet = compat_store.live_workers(
        now=now, stale_after=get_settings().WORKER_STALE_AFTER_SECONDS
    )
    blocked = sorted(m for m in foreign if not any(supports(w.markers, m) for w in fleet))
    return tuple(blocked), fleet


def waiting_for_compatible_worker(
    *, now: dt.datetime, run_id: uuid.UUID | None = None, limit: int = 50
) -> CompatibilityView:
    blocked, fleet = blocked_markers(now=now, run_id=run_id)
    if fleet is None and run_id is None:
        fleet = compat_store.live_workers(
            now=now, stale_after=get_settings().WORKER_STALE_AFTER_SECONDS
        )
    count, sample = compat_store.ready_tasks_requiring(blocked, limit=limit, run_id=run_id)
    return CompatibilityView(
        current=current_marker(),
        supported=local_markers(),
        fleet=fleet or [],
        blocked_markers=blocked,
        waiting_count=count,
        waiting=sample,
    )
