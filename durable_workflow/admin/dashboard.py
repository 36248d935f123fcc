"""The operator dashboard: what needs attention, counts, throughput, the fleet, schedules.

Every number is a link to the runs list filtered to the runs it counts. The
charts are SVG drawn here on the server (nothing is fetched by the browser but
the page itself). Archived runs are left out of the closed counts, as they are
out of the runs list the numbers link to. The page reads aggregates only: open
runs by status and type, runs closed over the last day by status (one
conditional count per bucket, in one query per chart), one count per attention kind, the live worker
registrations and the next schedules.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from durable_workflow import clock
from durable_workflow.admin.base import admin_url
from durable_workflow.conf import get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    ScheduleStatus,
    WorkerRegistration,
    WorkflowRun,
    WorkflowSchedule,
)
from durable_workflow.operations.attention import KINDS, attention_counts

OPEN_STATUSES = [s for s in RunStatus.values if s not in TERMINAL_RUN_STATUSES]
CLOSED_STATUSES = [s for s in RunStatus.values if s in TERMINAL_RUN_STATUSES]
#: How many schedules and workers the page lists by name.
SHOWN_ROWS = 20


def runs_url(**params: Any) -> str:
    """The runs list filtered by ``params`` (the list's own query parameters)."""
    base = reverse("admin:durable_workflow_workflowrun_changelist")
    query = {key: _param(value) for key, value in params.items() if value is not None}
    return f"{base}?{urlencode(query)}" if query else base


def _param(value: Any) -> str:
    if isinstance(value, dt.datetime):
        # Microseconds kept: a bound cut to the second would leave out of the list the
        # runs closed in that second, which the count beside the link includes.
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    return str(value)


@dataclasses.dataclass(frozen=True)
class Bucket:
    start: dt.datetime
    end: dt.datetime
    completed: int
    failed: int


@dataclasses.dataclass(frozen=True)
class Chart:
    title: str
    buckets: list[Bucket]
    svg: SafeString

    @property
    def completed(self) -> int:
        return sum(b.completed for b in self.buckets)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.buckets)


def closed_buckets(now: dt.datetime, *, count: int, width: dt.timedelta) -> list[Bucket]:
    """Runs that completed and that failed in each of ``count`` windows ending at ``now``."""
    edges = [now - width * (count - i) for i in range(count + 1)]
    counts: dict[str, Any] = {}
    for i in range(count):
        window = Q(closed_at__gte=edges[i], closed_at__lt=edges[i + 1])
        counts[f"c{i}"] = Count("pk", filter=window & Q(status=RunStatus.COMPLETED))
        counts[f"f{i}"] = Count("pk", filter=window & Q(status=RunStatus.FAILED))
    totals = WorkflowRun.objects.filter(
        closed_at__gte=edges[0], closed_at__lt=now, archived_at__isnull=True
    ).aggregate(**counts)
    return [
        Bucket(edges[i], edges[i + 1], totals[f"c{i}"] or 0, totals[f"f{i}"] or 0)
        for i in range(count)
    ]


def bar_chart(buckets: list[Bucket], *, label: str) -> SafeString:
    """Stacked bars (completed below, failed above), each part a link to its runs."""
    width, height, gap = 600, 120, 2
    bar = width / max(len(buckets), 1)
    peak = max([b.completed + b.failed for b in buckets] + [1])
    parts = []
    for i, bucket in enumerate(buckets):
        x = i * bar + gap / 2
        base: float = height
        for status, value, css in (
            (RunStatus.COMPLETED, bucket.completed, "dw-bar-completed"),
            (RunStatus.FAILED, bucket.failed, "dw-bar-failed"),
        ):
            if not value:
                continue
            tall = max(2.0, value / peak * (height - 10))
            base -= tall
            url = runs_url(status=status, closed_at__gte=bucket.start, closed_at__lt=bucket.end)
            title = f"{value} {status}, {bucket.start:%H:%M} to {bucket.end:%H:%M} UTC"
            parts.append(
                format_html(
                    '<a href="{}"><rect class="{}" x="{}" y="{}" width="{}" '
                    'height="{}"><title>{}</title></rect></a>',
                    url,
                    css,
                    f"{x:.1f}",
                    f"{base:.1f}",
                    f"{bar - gap:.1f}",
                    f"{tall:.1f}",
                    title,
                )
            )
    return format_html(
        '<svg class="dw-chart" viewBox="0 0 {} {}" role="img" aria-label="{}" '
        'preserveAspectRatio="none">{}</svg>',
        width,
        height,
        label,
        format_html_join("", "{}", ((p,) for p in parts)),
    )


def charts(now: dt.datetime) -> list[Chart]:
    hour = closed_buckets(now, count=12, width=dt.timedelta(minutes=5))
    day = closed_buckets(now, count=24, width=dt.timedelta(hours=1))
    return [
        Chart("Last hour (5-minute bars)", hour, bar_chart(hour, label="runs closed last hour")),
        Chart("Last day (hourly bars)", day, bar_chart(day, label="runs closed last day")),
    ]


def status_counts(now: dt.datetime) -> list[dict[str, Any]]:
    """Open runs by status, and runs closed over the last day by status."""
    since = now - dt.timedelta(days=1)
    open_rows = dict(
        WorkflowRun.objects.filter(status__in=OPEN_STATUSES)
        .values_list("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    closed_rows = dict(
        WorkflowRun.objects.filter(
            status__in=CLOSED_STATUSES, closed_at__gte=since, archived_at__isnull=True
        )
        .values_list("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    rows = [
        {"status": s, "count": open_rows.get(s, 0), "url": runs_url(status=s), "open": True}
        for s in OPEN_STATUSES
    ]
    rows += [
        {
            "status": s,
            "count": closed_rows.get(s, 0),
            "url": runs_url(status=s, closed_at__gte=since, closed_at__lt=now),
            "open": False,
        }
        for s in CLOSED_STATUSES
    ]
    return rows


def type_counts(now: dt.datetime) -> list[dict[str, Any]]:
    """Per workflow type: open runs, and runs failed over the last day."""
    since = now - dt.timedelta(days=1)
    rows = (
        WorkflowRun.objects.filter(
            Q(status__in=OPEN_STATUSES)
            | Q(status=RunStatus.FAILED, closed_at__gte=since, archived_at__isnull=True)
        )
        .values("workflow_type")
        .annotate(
            open=Count("pk", filter=Q(status__in=OPEN_STATUSES)),
            failed=Count("pk", filter=Q(status=RunStatus.FAILED)),
        )
        .order_by("-open", "workflow_type")[:50]
    )
    return [
        {
            **row,
            "open_url": runs_url(
                workflow_type=row["workflow_type"], status__in=",".join(OPEN_STATUSES)
            ),
            "failed_url": runs_url(
                workflow_type=row["workflow_type"],
                status=RunStatus.FAILED,
                closed_at__gte=since,
                closed_at__lt=now,
            ),
            "attention_url": runs_url(workflow_type=row["workflow_type"], attention="any"),
        }
        for row in rows
    ]


def attention_rows(now: dt.datetime) -> list[dict[str, Any]]:
    counts = attention_counts(now=now)
    return [
        {
            "key": key,
            "label": kind.label,
            "badge": kind.badge,
            "next_step": kind.next_step,
            "count": counts[key],
            "url": runs_url(attention=key),
        }
        for key, kind in KINDS.items()
    ]


def fleet(now: dt.datetime) -> dict[str, Any]:
    stale = dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
    live = WorkerRegistration.objects.filter(status="active", last_heartbeat_at__gte=now - stale)
    workers = [
        {
            "worker_id": worker.worker_id,
            "hostname": worker.hostname,
            "queues": ", ".join(str(q) for q in worker.queues or []),
            "last_heartbeat_at": worker.last_heartbeat_at,
            "url": admin_url(WorkerRegistration, worker.pk),
        }
        for worker in live.order_by("-last_heartbeat_at")[:SHOWN_ROWS]
    ]
    return {
        "live": live.count(),
        "workers": workers,
        "url": reverse("admin:durable_workflow_workerregistration_changelist"),
    }


def schedules() -> dict[str, Any]:
    active = WorkflowSchedule.objects.filter(status=ScheduleStatus.ACTIVE)
    rows = [
        {"schedule": schedule, "url": admin_url(WorkflowSchedule, schedule.pk)}
        for schedule in active.filter(next_fire_at__isnull=False).order_by("next_fire_at")[
            :SHOWN_ROWS
        ]
    ]
    return {
        "active": active.count(),
        "paused": WorkflowSchedule.objects.filter(status=ScheduleStatus.PAUSED).count(),
        "rows": rows,
        "url": reverse("admin:durable_workflow_workflowschedule_changelist"),
    }


def context(now: dt.datetime | None = None) -> dict[str, Any]:
    """Everything the dashboard template shows."""
    now = now or clock.now()
    attention = attention_rows(now)
    return {
        "now": now,
        "attention": attention,
        "attention_total": sum(row["count"] for row in attention),
        "attention_url": runs_url(attention="any"),
        "statuses": status_counts(now),
        "types": type_counts(now),
        "charts": charts(now),
        "fleet": fleet(now),
        "schedules": schedules(),
        "queues": limited_queues(now),
    }


def limited_queues(now: dt.datetime) -> list[dict[str, Any]]:
    """The limited work queues: limits, leases, the rate window, waiters by reason."""
    from durable_workflow import queue_limits
    from durable_workflow.operations.queue_limits import queue_report

    declared = queue_limits.declared()
    return [
        {
            "name": name,
            "limits": declared[name].describe(),
            "leased": row["leased"],
            "rate_starts": row["rate_starts_in_window"],
            "waiting": row["waiting"],
            "waiting_by_reason": ", ".join(
                f"{count} {reason}" for reason, count in row["waiting_by_reason"].items() if count
            ),
        }
        for name, row in queue_report(now).items()
    ]
