"""Checks of the durable work itself: stuck tasks, expired leases, overdue timers, lost runs."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db.models import Count, Min, Q, QuerySet

from durable_workflow.conf import get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    Task,
    TaskStatus,
    Timer,
    TimerStatus,
)
from durable_workflow.operations.doctor.result import (
    ERROR,
    OK,
    WARNING,
    CheckResult,
    DoctorContext,
)
from durable_workflow.operations.queries import (
    newest_instances,
    open_runs,
    parked_run_ids,
    runs_missing_their_task,
    runs_stopped_on_failed_task,
    unresolved_failure,
)
from durable_workflow.store import work_queues

REPAIR = (
    "Make sure the repair pass runs (the Celery beat entry, or "
    "`python manage.py workflow_repair --loop`) and that a worker consumes the queue."
)


#: Instance ids a finding lists by name; the rest are counted.
SHOWN_INSTANCES = 10


def affected(rows: QuerySet[Any, Any], field: str) -> dict[str, Any]:
    """The instances a finding concerns (``field`` of ``rows`` holds their ids): how many,
    and the first ids by name. The text output of ``workflow_doctor`` prints them: an
    operator knows instances, not task ids."""
    ids = rows.order_by(field).values_list(field, flat=True).distinct()
    return {"count": ids.count(), "first": [str(i) for i in ids[:SHOWN_INSTANCES]]}


def _named(instances: dict[str, Any]) -> str:
    """``a, b, c`` (and how many more) for the ``affected`` summary ``instances``."""
    more = instances["count"] - len(instances["first"])
    return ", ".join(instances["first"]) + (f" and {more} more" if more > 0 else "")


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def _age(ctx: DoctorContext, since: dt.datetime | None) -> float:
    return round((ctx.now - since).total_seconds(), 3) if since else 0.0


def _per_resolved_queue(tasks: Any) -> dict[str, int]:
    """Task counts by ``connection:queue``, each queue resolved as Celery will route it
    (the twenty largest)."""
    from durable_workflow.operations.queues import effective_queue

    counts: Counter[str] = Counter()
    grouped = tasks.values("connection", "queue", "task_type").annotate(n=Count("id"))
    for row in grouped.order_by():
        try:
            queue = effective_queue(row["queue"], row["connection"], row["task_type"])
        except Exception:  # an unloadable connection: the configuration checks say so
            queue = row["queue"] or "default"
        counts[f"{row['connection'] or 'default'}:{queue}"] += row["n"]
    return dict(counts.most_common(20))


def check_stuck_tasks(ctx: DoctorContext) -> CheckResult:
    threshold = ctx.stuck_threshold()
    # Tasks no live worker may claim are waiting for a compatible worker, not stuck:
    # the worker_compatibility check reports them.
    stuck = (
        Task.objects.filter(
            status=TaskStatus.READY, available_at__lte=ctx.now - dt.timedelta(seconds=threshold)
        )
        .exclude(compatibility__in=ctx.blocked_markers())
        # Waiting for capacity on a limited queue: the queue_limits check reports them.
        .exclude(queue_wait__in=work_queues.WAITING)
    )
    summary = stuck.aggregate(count=Count("id"), oldest=Min("available_at"))
    title = "No ready task left unclaimed"
    if not summary["count"]:
        return CheckResult(
            "stuck_tasks", title, OK, f"no ready task has waited more than {threshold:.0f} s"
        )
    per_queue = _per_resolved_queue(stuck)
    # Tasks that were taken and ended without an outcome (they failed or their worker
    # died): not unclaimed, but failing; the instances say which runs.
    failing = affected(stuck.filter(attempt_count__gt=0), "run__instance_id")
    message = (
        f"{summary['count']} ready task(s) due for more than {threshold:.0f} s and not claimed "
        f"(oldest due {_age(ctx, summary['oldest']):.0f} s ago)"
    )
    if failing["count"]:
        message += (
            f"; the tasks of {failing['count']} run(s) were attempted and failed or crashed "
            f"their worker ({_named(failing)}): see their last_error"
        )
    return CheckResult(
        "stuck_tasks",
        title,
        WARNING,
        message,
        REPAIR,
        details={
            "count": summary["count"],
            "threshold_seconds": threshold,
            "oldest_due_at": _iso(summary["oldest"]),
            "by_queue": per_queue,
            "affected_instances": affected(stuck, "run__instance_id"),
            "failing_instances": failing,
        },
    )


def check_expired_leases(ctx: DoctorContext) -> CheckResult:
    grace = 2 * get_settings().REPAIR_INTERVAL_SECONDS + 1
    expired = Task.objects.filter(
        status=TaskStatus.LEASED, lease_expires_at__lt=ctx.now - dt.timedelta(seconds=grace)
    )
    summary = expired.aggregate(count=Count("id"), oldest=Min("lease_expires_at"))
    title = "No expired lease left behind"
    if not summary["count"]:
        return CheckResult("expired_leases", title, OK, "no lease is overdue for reclaiming")
    return CheckResult(
        "expired_leases",
        title,
        WARNING,
        f"{summary['count']} task lease(s) expired and were not reclaimed "
        f"(oldest expired {_age(ctx, summary['oldest']):.0f} s ago)",
        REPAIR,
        details={
            "count": summary["count"],
            "oldest_expired_at": _iso(summary["oldest"]),
            "affected_instances": affected(expired, "run__instance_id"),
        },
    )


def check_overdue_timers(ctx: DoctorContext) -> CheckResult:
    threshold = ctx.stuck_threshold()
    overdue = Timer.objects.filter(
        status=TimerStatus.PENDING,
        fire_at__lte=ctx.now - dt.timedelta(seconds=threshold),
        run__status__in=[s for s in RunStatus.values if s not in TERMINAL_RUN_STATUSES],
    ).exclude(run__compatibility__in=ctx.blocked_markers())
    summary = overdue.aggregate(count=Count("id"), oldest=Min("fire_at"))
    title = "Timers fire on time"
    if not summary["count"]:
        return CheckResult("overdue_timers", title, OK, "no timer is overdue")
    return CheckResult(
        "overdue_timers",
        title,
        WARNING,
        f"{summary['count']} timer(s) should have fired more than {threshold:.0f} s ago "
        f"(oldest due {_age(ctx, summary['oldest']):.0f} s ago)",
        REPAIR,
        details={
            "count": summary["count"],
            "oldest_fire_at": _iso(summary["oldest"]),
            "affected_instances": affected(overdue, "run__instance_id"),
        },
    )


def check_run_deadlines(ctx: DoctorContext) -> CheckResult:
    threshold = ctx.stuck_threshold()
    cutoff = ctx.now - dt.timedelta(seconds=threshold)
    late = open_runs().filter(Q(run_deadline_at__lt=cutoff) | Q(execution_deadline_at__lt=cutoff))
    count = late.count()
    title = "Open runs are within their deadlines"
    if not count:
        return CheckResult("run_deadlines", title, OK, "no open run is past its deadline")
    sample = [str(i) for i in late.values_list("instance_id", flat=True)[:10]]
    return CheckResult(
        "run_deadlines",
        title,
        WARNING,
        f"{count} open run(s) are past their run or execution deadline (e.g. {', '.join(sample)})",
        "A workflow task closes them as timed out; run `python manage.py workflow_repair "
        "--instance-id <id>` for each one if nothing happens.",
        details={
            "count": count,
            "instances": sample,
            "affected_instances": affected(late, "instance_id"),
        },
    )


def check_resume_paths(ctx: DoctorContext) -> CheckResult:
    """Open runs that cannot move on by themselves: a failed or a lost workflow task.

    The parked runs are read from the failed workflow tasks, then by primary key: what
    this reads grows with the runs it reports, not with the open or closed runs."""
    parked = parked_run_ids()
    failed = newest_instances(open_runs(), parked, 50)
    lost = [str(i) for i in runs_missing_their_task().values_list("instance_id", flat=True)[:50]]
    # Unresolved failures park a run too: only the parked runs can have one.
    unresolved = newest_instances(open_runs().filter(unresolved_failure()), parked, 50)
    title = "Every open run has a way to resume"
    if not failed and not lost:
        return CheckResult("durable_resume_paths", title, OK, "no open run needs repair")
    parts = []
    if failed:
        shown = {"count": len(failed), "first": failed[:SHOWN_INSTANCES]}
        parts.append(f"{len(failed)} run(s) stopped on a failed workflow task ({_named(shown)})")
    if unresolved:
        shown = {"count": len(unresolved), "first": unresolved[:SHOWN_INSTANCES]}
        parts.append(
            f"{len(unresolved)} of them replay a failure whose exception class resolves to "
            f"nothing ({_named(shown)}): map its type in EXCEPTION_TYPES or "
            "EXCEPTION_CLASS_ALIASES"
        )
    if lost:
        parts.append(f"{len(lost)} pending run(s) have no task at all")
    return CheckResult(
        "durable_resume_paths",
        title,
        ERROR if failed else WARNING,
        "; ".join(parts),
        "Read the failure on the run's admin page, fix and deploy the code, then "
        "`python manage.py workflow_repair --instance-id <id>` (or the admin's repair action).",
        details={
            "failed_workflow_task": failed,
            "missing_task": lost,
            "unresolved_failure": unresolved,
            "affected_instances": affected(
                open_runs().filter(
                    Q(id__in=runs_stopped_on_failed_task().values("id"))
                    | Q(id__in=runs_missing_their_task().values("id"))
                ),
                "instance_id",
            ),
        },
    )


def check_history_budget(ctx: DoctorContext) -> CheckResult:
    events, size = 10_000, 5 * 1024 * 1024
    heavy = open_runs().filter(Q(next_sequence__gt=events) | Q(history_size_bytes__gte=size))
    count = heavy.count()
    title = "Histories stay within budget"
    if not count:
        return CheckResult("history_budget", title, OK, "no open run has an oversized history")
    sample = [str(i) for i in heavy.values_list("instance_id", flat=True)[:10]]
    return CheckResult(
        "history_budget",
        title,
        WARNING,
        f"{count} open run(s) have more than {events} events or {size} bytes of history",
        "Call `dw.continue_as_new(...)` from long-lived workflows when "
        "`self.should_continue_as_new()` says so.",
        details={
            "count": count,
            "instances": sample,
            "affected_instances": affected(heavy, "instance_id"),
        },
    )
