"""Gauges of the limited work queues (``DURABLE_WORKFLOW["QUEUES"]``): their limits,
live leases, waiting tasks by the limit that holds them, and the rate window.

Read from the database at the scrape, like the other database gauges
(:func:`durable_workflow.operations.queue_limits.queue_report`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily


def families(report: dict[str, dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
    limit = GaugeMetricFamily(
        "durable_workflow_queue_limit",
        "The limits of a limited work queue: concurrency, worker_concurrency, and rate "
        "(starts per durable_workflow_queue_rate_period_seconds).",
        labels=["queue", "limit"],
    )
    period = GaugeMetricFamily(
        "durable_workflow_queue_rate_period_seconds",
        "The window a rate-limited work queue counts its starts over.",
        labels=["queue"],
    )
    leased = GaugeMetricFamily(
        "durable_workflow_queue_leased_attempts",
        "Activity attempts of a limited work queue holding a live lease now.",
        labels=["queue"],
    )
    waiting = GaugeMetricFamily(
        "durable_workflow_queue_waiting_tasks",
        "Tasks of a limited work queue waiting without a message, by the limit that holds "
        "them (concurrency, rate, worker_concurrency), and sent for a slot but not "
        "claimed yet (sent).",
        labels=["queue", "reason"],
    )
    starts = GaugeMetricFamily(
        "durable_workflow_queue_rate_window_starts",
        "Attempt starts of a rate-limited work queue in its current window.",
        labels=["queue"],
    )
    for name, row in report.items():
        for key, value in (
            ("concurrency", row["concurrency"]),
            ("worker_concurrency", row["worker_concurrency"]),
            ("rate", row["rate_limit"]),
        ):
            if value is not None:
                limit.add_metric([name, key], value)
        leased.add_metric([name], row["leased"])
        for reason, count in row["waiting_by_reason"].items():
            waiting.add_metric([name, reason], count)
        waiting.add_metric([name, "sent"], row["woken"])
        if row["rate"] is not None:
            period.add_metric([name], row["rate_period_seconds"])
            starts.add_metric([name], row["rate_starts_in_window"])
    yield from (limit, period, leased, waiting, starts)
