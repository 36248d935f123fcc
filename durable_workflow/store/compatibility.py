"""Compatibility markers in the database: task stamps, the fleet's markers, blocked work."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Final

from django.db.models import Q

from durable_workflow.compatibility import WILDCARD
from durable_workflow.models import Task, TaskStatus, WorkerRegistration, WorkflowRun
from durable_workflow.store.records import WaitingTask, WorkerMarkers


class FromRun:
    """Default of ``tasks.create_task(compatibility=...)``: copy the run's marker."""

    def __repr__(self) -> str:
        return "FROM_RUN"


FROM_RUN: Final = FromRun()


def task_marker(run_id: uuid.UUID, marker: str | FromRun | None) -> str | None:
    """The marker a new task of the run carries; one read when the caller did not pass it."""
    if not isinstance(marker, FromRun):
        return marker
    return WorkflowRun.objects.filter(id=run_id).values_list("compatibility", flat=True).first()


def claimable(markers: Collection[str]) -> Q:
    """Tasks a worker advertising ``markers`` may claim (unmarked ones always)."""
    if WILDCARD in markers:
        return Q()
    return Q(compatibility__isnull=True) | Q(compatibility="") | Q(compatibility__in=list(markers))


def note_handed_back(task_id: uuid.UUID, *, now: dt.datetime) -> None:
    """A message was re-sent for the ready task: the repair pass need not send another yet."""
    Task.objects.filter(id=task_id, status=TaskStatus.READY).update(last_dispatched_at=now)


def live_workers(*, now: dt.datetime, stale_after: float) -> list[WorkerMarkers]:
    """Registrations that heartbeat within ``stale_after`` seconds, with their markers."""
    cutoff = now - dt.timedelta(seconds=stale_after)
    rows = WorkerRegistration.objects.filter(
        status="active", last_heartbeat_at__gte=cutoff
    ).values_list("worker_id", "queues", "compatibility", "last_heartbeat_at")
    return [
        WorkerMarkers(
            worker_id=worker_id,
            queues=tuple(str(q) for q in queues or ()),
            markers=tuple(str(m) for m in markers or ()),
            last_heartbeat_at=beat,
        )
        for worker_id, queues, markers, beat in rows.order_by("worker_id")
    ]


def markers_of_ready_tasks(run_id: uuid.UUID | None = None) -> set[str]:
    """The distinct markers that ready tasks (of one run, or all) require."""
    rows = Task.objects.filter(status=TaskStatus.READY, compatibility__isnull=False).exclude(
        compatibility=""
    )
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    markers = rows.order_by().values_list("compatibility", flat=True).distinct()
    return {marker for marker in markers if marker is not None}  # NULLs excluded above


def ready_tasks_requiring(
    markers: Collection[str], *, limit: int, run_id: uuid.UUID | None = None
) -> tuple[int, list[WaitingTask]]:
    """How many ready tasks require one of ``markers``, and the oldest ``limit`` of them."""
    if not markers:
        return 0, []
    rows = Task.objects.filter(status=TaskStatus.READY, compatibility__in=list(markers))
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    sample = rows.order_by("available_at", "id").values_list(
        "id",
        "run_id",
        "run__instance_id",
        "task_type",
        "compatibility",
        "queue",
        "connection",
        "available_at",
    )[:limit]
    waiting = [
        WaitingTask(task, run, instance, kind, marker, queue, connection, available_at)
        for task, run, instance, kind, marker, queue, connection, available_at in sample
        if marker is not None  # matched by ``__in``
    ]
    return rows.count(), waiting
