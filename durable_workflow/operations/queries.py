"""Read-only questions about runs and tasks that several operator tools ask."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet

from durable_workflow.conf import get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    Task,
    TaskStatus,
    TaskType,
    WorkflowRun,
)
from durable_workflow.store import work_queues

OPEN_TASK = (TaskStatus.READY, TaskStatus.LEASED)
#: Ids per ``IN`` list (SQLite allows 32,766 parameters, PostgreSQL 65,535).
ID_CHUNK = 10_000


def open_runs() -> QuerySet[WorkflowRun]:
    return WorkflowRun.objects.exclude(status__in=TERMINAL_RUN_STATUSES)


def failed_last_workflow_tasks(run: Any = None) -> QuerySet[Task]:
    """Failed workflow tasks that are their run's latest workflow task (of ``run``, an
    ``OuterRef`` to a run's id, when given: a correlated lookup per run).

    Asked from the failed workflow tasks (a partial index holds only those), not run by
    run: the cost does not grow with the open runs. The latest is the last by
    ``(created_at, id)``, as in describe(): ties on created_at (one clock reading, or a
    frozen clock) go to the later id (time-ordered UUIDs).
    """
    later = Task.objects.filter(run=OuterRef("run"), task_type=TaskType.WORKFLOW).filter(
        Q(created_at__gt=OuterRef("created_at"))
        | Q(created_at=OuterRef("created_at"), id__gt=OuterRef("id"))
    )
    failed = Task.objects.filter(task_type=TaskType.WORKFLOW, status=TaskStatus.FAILED)
    if run is not None:
        failed = failed.filter(run=run)
    return failed.filter(~Exists(later))


def runs_stopped_on_failed_task() -> QuerySet[WorkflowRun]:
    """Open runs whose latest workflow task failed (replay error): they wait for repair.

    The run ids come from a sub-query driven by the failed workflow tasks (a partial
    index holds only those), each checked for an open run. Asked as "open runs whose id
    is among the failed tasks' runs", PostgreSQL may merge the two along the runs'
    primary key, reading every closed run older than the first open one (6 to 16 s on
    a million runs); the open-run check inside the sub-query keeps it on the tasks."""
    return open_runs().filter(pk__in=_parked_tasks().values("run_id"))


def parked_run_ids() -> list[Any]:
    """Ids of the runs of ``runs_stopped_on_failed_task()``, read from the failed workflow
    tasks without the runs' ordering (the doctor reads their runs by primary key)."""
    return list(_parked_tasks().values_list("run_id", flat=True))


def parked_runs() -> Q:
    """A run filter for ``runs_stopped_on_failed_task()``, by the ids read first (a few
    index entries, whatever the plan of the rest of the statement); by the sub-query
    when there are more than ``ID_CHUNK`` of them (every backend's parameter limit)."""
    ids = parked_run_ids()
    if len(ids) <= ID_CHUNK:
        return Q(pk__in=ids)
    return Q(pk__in=_parked_tasks().values("run_id"))


def _parked_tasks() -> QuerySet[Task]:
    """The failed workflow tasks that are their open run's latest."""
    open_run = open_runs().filter(pk=OuterRef("run_id"))
    return failed_last_workflow_tasks().filter(Exists(open_run)).order_by()


def newest_instances(runs: QuerySet[WorkflowRun], run_ids: list[Any], limit: int) -> list[str]:
    """Instance ids of the newest ``limit`` of ``runs`` among ``run_ids`` (read by primary
    key, in chunks that stay under every backend's parameter limit)."""
    found: list[tuple[Any, str]] = []
    for start in range(0, len(run_ids), ID_CHUNK):
        rows = runs.filter(pk__in=run_ids[start : start + ID_CHUNK])
        found += rows.order_by("-created_at").values_list("created_at", "instance_id")[:limit]
    found.sort(key=lambda row: row[0], reverse=True)
    return [str(instance_id) for _, instance_id in found[:limit]]


def runs_blocked_by_unresolved_failures() -> QuerySet[WorkflowRun]:
    """Open runs parked because history holds a failure no exception class resolves to."""
    return runs_stopped_on_failed_task().filter(unresolved_failure())


def unresolved_failure() -> Exists:
    """A run's history holds a failure no exception class resolves to (runs filter)."""
    from durable_workflow.models import WorkflowFailure

    return Exists(
        WorkflowFailure.objects.filter(
            run=OuterRef("pk"),
            source_kind="workflow_task",
            details__task_failure_reason="unresolved_failure",
        )
    )


def runs_missing_their_task() -> QuerySet[WorkflowRun]:
    """Pending runs with no open task at all: the task row was lost.

    Both conditions are correlated lookups on the run's tasks (``NOT EXISTS``): a
    ``NOT IN`` over the failed workflow tasks is planned as a hashed sub-plan that
    PostgreSQL costs (and JIT-compiles) as a join of the whole task table, even when
    no run is pending.
    """
    return open_runs().filter(missing_their_task())


def missing_their_task() -> Q:
    """A run filter: pending, no open task, and not parked on a failed workflow task."""
    open_task = Task.objects.filter(run=OuterRef("pk"), status__in=OPEN_TASK)
    return (
        Q(status=RunStatus.PENDING)
        & ~Exists(open_task)
        & ~Exists(failed_last_workflow_tasks(run=OuterRef("pk")))
    )


def dispatch_overdue_filter(now: dt.datetime) -> Q:
    """Ready, due tasks whose last message is older than the re-send threshold.

    Work held back by a limited queue (``queue_wait`` a waiting reason) has no message
    on purpose and is not counted; once sent a message for its slot it is again.
    """
    cutoff = now - dt.timedelta(seconds=get_settings().REDISPATCH_AFTER_SECONDS)
    return (
        Q(status=TaskStatus.READY, available_at__lte=cutoff)
        & (Q(last_dispatched_at__isnull=True) | Q(last_dispatched_at__lte=cutoff))
        & ~Q(queue_wait__in=work_queues.WAITING)
    )


def age_ms(now: dt.datetime, since: dt.datetime | None) -> int | None:
    return int((now - since).total_seconds() * 1000) if since else None


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def queue_rows(now: dt.datetime) -> list[Mapping[str, Any]]:
    """Per (connection, queue, task type): ready, delayed, leased, expired, overdue, flow."""
    minute_ago = now - dt.timedelta(minutes=1)
    ready = Q(status=TaskStatus.READY, available_at__lte=now)
    expired = Q(status=TaskStatus.LEASED, lease_expires_at__lt=now)
    overdue = dispatch_overdue_filter(now)
    return list(
        Task.objects.filter(
            Q(status__in=OPEN_TASK)
            | Q(created_at__gte=minute_ago)
            | Q(last_dispatched_at__gte=minute_ago)
        )
        .values("connection", "queue", "task_type")
        .annotate(
            ready=Count("id", filter=ready),
            delayed=Count("id", filter=Q(status=TaskStatus.READY, available_at__gt=now)),
            leased=Count("id", filter=Q(status=TaskStatus.LEASED)),
            expired_leases=Count("id", filter=expired),
            dispatch_overdue=Count("id", filter=overdue),
            added_last_minute=Count("id", filter=Q(created_at__gte=minute_ago)),
            dispatched_last_minute=Count("id", filter=Q(last_dispatched_at__gte=minute_ago)),
            oldest_ready=Min("available_at", filter=ready),
            oldest_expired=Min("lease_expires_at", filter=expired),
            oldest_overdue=Min("available_at", filter=overdue),
            newest=Max("created_at"),
        )
        .order_by("connection", "queue", "task_type")
    )
