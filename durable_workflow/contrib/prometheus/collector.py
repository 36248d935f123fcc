"""Gauges read from the database when Prometheus scrapes: open runs, tasks by queue, and
the limited work queues (``queues``).

Two aggregate queries per scrape (and the limited queues' own, and one more when a
queue limits its runs), on indexed status columns, whatever the history size. The
numbers are the database's, so every process that serves the scrape view reports the
same ones (aggregate them with ``max``, not ``sum``, across instances).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError
from django.db.models import Count, Min, Q
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from durable_workflow import clock
from durable_workflow.contrib.prometheus.queues import families as queue_families
from durable_workflow.contrib.prometheus.recorder import queue_label
from durable_workflow.logs import get_logger
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    Task,
    TaskStatus,
    WorkflowRun,
)
from durable_workflow.operations.doctor.workflow_queues import workflow_queue_usage
from durable_workflow.operations.queue_limits import queue_report

logger = get_logger("durable_workflow")

OPEN_RUN_STATUSES = [status for status in RunStatus.values if status not in TERMINAL_RUN_STATUSES]


def open_runs() -> dict[tuple[str, str], int]:
    """Open runs per (workflow type, queue)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    rows = (
        WorkflowRun.objects.filter(status__in=OPEN_RUN_STATUSES)
        .values("workflow_type", "queue", "connection")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        queue = queue_label(row["queue"], row["connection"], "workflow")
        counts[(row["workflow_type"], queue)] += row["n"]
    return counts


def open_tasks(now: dt.datetime) -> dict[tuple[str, str], dict[str, float]]:
    """Per (task type, queue): ready, delayed and leased tasks, and the oldest ready one's age."""
    ready = Q(status=TaskStatus.READY, available_at__lte=now)
    rows = (
        Task.objects.filter(status__in=(TaskStatus.READY, TaskStatus.LEASED))
        .values("task_type", "queue", "connection")
        .annotate(
            ready=Count("id", filter=ready),
            delayed=Count("id", filter=Q(status=TaskStatus.READY, available_at__gt=now)),
            leased=Count("id", filter=Q(status=TaskStatus.LEASED)),
            oldest=Min("available_at", filter=ready),
        )
        .order_by()
    )
    found: dict[tuple[str, str], dict[str, float]] = {}
    for row in rows:
        key = (row["task_type"], queue_label(row["queue"], row["connection"], row["task_type"]))
        entry = found.setdefault(key, {"ready": 0, "delayed": 0, "leased": 0, "age": 0.0})
        for name in ("ready", "delayed", "leased"):
            entry[name] += row[name]
        if row["oldest"] is not None:
            entry["age"] = max(entry["age"], (now - row["oldest"]).total_seconds())
    return found


class DatabaseCollector(Collector):
    """The database gauges; ``durable_workflow_database_collector_up`` is 0 when the
    queries failed (the rest of the scrape is still served)."""

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # registering must not query the database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            "durable_workflow_database_collector_up",
            "1 when the database gauges of this scrape could be read, else 0.",
        )
        now = clock.now()
        try:
            runs, tasks, queues = open_runs(), open_tasks(now), queue_report(now)
            slots = workflow_queue_usage()
        except DatabaseError:
            logger.exception("the Prometheus database gauges could not be read")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from _families(runs, tasks, queues)
        yield from _workflow_queue_families(slots)


def _workflow_queue_families(queues: dict[str, dict[str, int]]) -> Iterator[GaugeMetricFamily]:
    """Limit, running and waiting runs of each queue limiting its runs (none: no series)."""
    described = {
        "limit": "The most runs of the queue let start at once (workflow_concurrency).",
        "running": "Open runs of the queue holding a slot (let start, not closed).",
        "waiting": "Runs of the queue waiting, pending, for a free slot.",
    }
    for state, text in described.items():
        family = GaugeMetricFamily(
            f"durable_workflow_workflow_queue_{state}", text, labels=["queue"]
        )
        for queue, row in sorted(queues.items()):
            family.add_metric([queue], row[state])
        yield family


def _families(
    runs: dict[tuple[str, str], int],
    tasks: dict[tuple[str, str], dict[str, float]],
    queues: dict[str, dict[str, Any]] | None = None,
) -> Iterator[GaugeMetricFamily]:
    open_runs = GaugeMetricFamily(
        "durable_workflow_open_runs",
        "Workflow runs not closed yet, by workflow type and queue.",
        labels=["workflow_type", "queue"],
    )
    for (workflow_type, queue), count in sorted(runs.items()):
        open_runs.add_metric([workflow_type, queue], count)
    yield open_runs
    described = {
        "ready": "Tasks due and waiting for a worker, by task type and queue.",
        "delayed": "Tasks not due yet (timers, retry back-offs), by task type and queue.",
        "leased": "Tasks a worker holds now, by task type and queue.",
    }
    for state, text in described.items():
        family = GaugeMetricFamily(
            f"durable_workflow_{state}_tasks", text, labels=["task_type", "queue"]
        )
        for (task_type, queue), entry in sorted(tasks.items()):
            family.add_metric([task_type, queue], entry[state])
        yield family
    oldest = GaugeMetricFamily(
        "durable_workflow_oldest_ready_task_age_seconds",
        "How long the oldest ready task has been due (0: none ready), by task type and queue.",
        labels=["task_type", "queue"],
    )
    for (task_type, queue), entry in sorted(tasks.items()):
        oldest.add_metric([task_type, queue], entry["age"])
    yield oldest
    yield from queue_families(queues or {})
