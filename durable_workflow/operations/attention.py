"""Runs that need an operator's attention, by kind: what the admin dashboard and the
runs list's "needs attention" filter read.

Each kind is a question about open runs answered from committed rows (nothing is
replayed, nothing is inspected over the broker): the admin asks it on every page
load, so every answer is one query over indexed columns. ``runs_needing(kind)``
returns the runs as a queryset (the list filters on it); ``attention_counts()``
counts each kind; ``attention_of(run_ids)`` says which kinds concern each run of a
page (the list's badge).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.models import (
    ActivityExecution,
    ActivityStatus,
    Task,
    TaskStatus,
    TaskType,
    Timer,
    TimerStatus,
    WorkerRegistration,
    WorkflowRun,
)
from durable_workflow.operations.compatibility import blocked_markers
from durable_workflow.operations.queries import (
    failed_last_workflow_tasks,
    missing_their_task,
    open_runs,
    parked_runs,
    runs_missing_their_task,
)


@dataclasses.dataclass(frozen=True)
class AttentionKind:
    key: str
    #: The badge's text in the runs list.
    badge: str
    #: What the dashboard says about the runs of this kind.
    label: str
    #: What to do about it (the operator's guide says more).
    next_step: str


KINDS: dict[str, AttentionKind] = {
    kind.key: kind
    for kind in (
        AttentionKind(
            "parked",
            "failed task",
            "parked on a failed workflow task",
            "Read the failure on the run page, deploy a fix, then Retry failed workflow task.",
        ),
        AttentionKind(
            "poison",
            "task failing",
            "workflow task failing or killing its worker (not parked yet)",
            "Read the task's last error on the run page; it is parked after "
            "WORKFLOW_TASK_MAX_ATTEMPTS attempts.",
        ),
        AttentionKind(
            "incompatible",
            "no compatible worker",
            "blocked on a compatibility marker no live worker supports",
            "Start a worker that supports the run's compatibility marker.",
        ),
        AttentionKind(
            "no_worker",
            "queue not consumed",
            "ready work on a queue no live worker consumes",
            "Start a worker for the queue: celery -A <project> worker -Q <queue>.",
        ),
        AttentionKind(
            "overdue_timer",
            "timer overdue",
            "timers that should have fired already",
            "Check that the repair pass and a worker for the run's queue are running.",
        ),
        AttentionKind(
            "retrying",
            "activity retrying",
            "activities failing and being retried",
            "Read the activity's attempts; fix the dependency or terminate the run.",
        ),
        AttentionKind(
            "missing_task",
            "no task",
            "pending runs with no task at all",
            "Repair the run (the repair pass does it within a minute).",
        ),
        AttentionKind(
            "past_deadline",
            "past deadline",
            "open runs past their run or execution deadline",
            "Repair the run so a workflow task closes it as timed out.",
        ),
    )
}


def stuck_after_seconds() -> float:
    """How late a due timer may be before it counts as overdue (the doctor's threshold)."""
    return max(60.0, 10.0 * get_settings().REDISPATCH_AFTER_SECONDS)


def consumed_queues(now: dt.datetime) -> set[str]:
    """Queues a live, registered worker process consumes."""
    stale = dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
    rows = WorkerRegistration.objects.filter(
        status="active", last_heartbeat_at__gte=now - stale
    ).values_list("queues", flat=True)
    return {str(queue) for queues in rows for queue in queues or []}


def _unconsumed(now: dt.datetime) -> QuerySet[Task]:
    """Ready, due tasks routed to a queue that no live worker lists."""
    from durable_workflow.operations.queues import effective_queue

    consumed = consumed_queues(now)
    ready = Task.objects.filter(status=TaskStatus.READY, available_at__lte=now)
    scopes = Q(pk__in=[])
    for connection, queue in ready.order_by().values_list("connection", "queue").distinct():
        try:
            name = effective_queue(queue, connection)
        except Exception:  # an unknown connection: its tasks go nowhere either
            name = None
        if name not in consumed:
            scopes |= Q(connection=connection, queue=queue)
    return ready.filter(scopes)


def _rows(key: str, now: dt.datetime) -> QuerySet[Any]:
    """The rows (with a ``run`` foreign key) whose existence puts a run under ``key``."""
    if key == "poison":
        return Task.objects.filter(
            task_type=TaskType.WORKFLOW, status=TaskStatus.READY, attempt_count__gte=1
        )
    if key == "incompatible":
        blocked = blocked_markers(now=now)[0]
        return Task.objects.filter(status=TaskStatus.READY, compatibility__in=blocked)
    if key == "no_worker":
        return _unconsumed(now)
    if key == "overdue_timer":
        late = now - dt.timedelta(seconds=stuck_after_seconds())
        return Timer.objects.filter(status=TimerStatus.PENDING, fire_at__lte=late)
    if key == "retrying":
        open_activity = (ActivityStatus.PENDING, ActivityStatus.RUNNING)
        # A second attempt runs, or one waits for its back-off after a failed attempt.
        return ActivityExecution.objects.filter(status__in=open_activity).filter(
            Q(attempt_count__gte=2) | Q(status=ActivityStatus.PENDING, attempt_count__gte=1)
        )
    raise KeyError(key)


def _condition(key: str, now: dt.datetime) -> Q:
    """Which open runs ``key`` concerns, asked of all of them at once (a list, a count)."""
    if key == "parked":
        return parked_runs()
    if key == "missing_task":
        return Q(pk__in=runs_missing_their_task().values("pk"))
    if key == "past_deadline":
        return Q(run_deadline_at__lt=now) | Q(execution_deadline_at__lt=now)
    return Q(pk__in=_rows(key, now).values("run_id"))


def _condition_per_run(key: str, now: dt.datetime) -> Q | Exists:
    """The same question asked of one run at a time (a correlated lookup on its rows).

    For a page of runs this reads a few index entries per run, whatever the table
    sizes. Asked as ``pk IN (all such runs)``, PostgreSQL plans each kind for the whole
    database; on a million runs it walked the runs' primary key for the parked kind
    (3 s for a page of 50 where the statistics made it guess wrong)."""
    if key == "parked":
        return Exists(failed_last_workflow_tasks(run=OuterRef("pk")))
    if key == "missing_task":
        return missing_their_task()
    if key == "past_deadline":
        return _condition(key, now)
    return Exists(_rows(key, now).filter(run=OuterRef("pk")))


def runs_needing(kind: str, *, now: dt.datetime | None = None) -> QuerySet[WorkflowRun]:
    """Open runs of one kind (``"any"``: of any kind). An unknown kind is a KeyError."""
    now = now or clock.now()
    if kind == "any":
        condition = Q(pk__in=[])
        for key in KINDS:
            condition |= _condition(key, now)
    else:
        if kind not in KINDS:
            raise KeyError(kind)
        condition = _condition(kind, now)
    return open_runs().filter(condition)


def attention_counts(*, now: dt.datetime | None = None) -> dict[str, int]:
    """How many open runs each kind concerns (a run may count under several kinds)."""
    now = now or clock.now()
    return {key: open_runs().filter(_condition(key, now)).count() for key in KINDS}


def attention_of(
    run_ids: Iterable[uuid.UUID], *, now: dt.datetime | None = None
) -> dict[uuid.UUID, list[str]]:
    """For a page of runs: the kinds that concern each one (one query for the page)."""
    now = now or clock.now()
    ids = list(run_ids)
    found: dict[uuid.UUID, list[str]] = {run_id: [] for run_id in ids}
    if not ids:
        return found
    flags = {
        f"dw_{key}": ExpressionWrapper(_condition_per_run(key, now), output_field=BooleanField())
        for key in KINDS
    }
    rows = open_runs().filter(pk__in=ids).annotate(**flags).values("pk", *flags)
    for row in rows:
        found[row["pk"]] = [key for key in KINDS if row[f"dw_{key}"]]
    return found
