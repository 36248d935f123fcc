"""The state of the limited work queues, as the doctor, the admin dashboard and the
Prometheus gauges show it: one reading, three views."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import queue_limits
from durable_workflow.store import work_queues


def queue_report(now: dt.datetime) -> dict[str, dict[str, Any]]:
    """``{queue: {"concurrency", "rate", "rate_limit", "rate_period_seconds",
    "worker_concurrency", "leased", "waiting", "waiting_by_reason", "woken",
    "rate_starts_in_window"}}`` of every limited queue (``None``: that limit is off)."""
    declared = queue_limits.declared()
    windows = {name: q.rate.period for name, q in declared.items() if q.rate is not None}
    used = work_queues.usage(sorted(declared), now=now, windows=windows)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(declared):
        limit, usage = declared[name], used[name]
        rate = limit.rate
        out[name] = {
            "concurrency": limit.concurrency,
            "rate": None if rate is None else str(rate),
            "rate_limit": None if rate is None else rate.limit,
            "rate_period_seconds": None if rate is None else rate.period,
            "worker_concurrency": limit.worker_concurrency,
            "leased": usage.leased,
            "waiting": usage.waiting,
            "waiting_by_reason": {
                queue_limits.REASONS[reason]: count
                for reason, count in usage.waiting_by_reason.items()
            },
            "woken": usage.woken,
            "rate_starts_in_window": None if rate is None else usage.starts_in_window,
        }
    return out


def one_line(name: str, row: dict[str, Any]) -> str:
    """``queue "stripe": 2/3 leased, 4 started in the rate window (5/s), 7 waiting``."""
    leased = f"{row['leased']}/{row['concurrency']}" if row["concurrency"] else str(row["leased"])
    parts = [f'queue "{name}": {leased} leased']
    if row["rate"]:
        parts.append(f"{row['rate_starts_in_window']} started in the rate window ({row['rate']})")
    if row["worker_concurrency"]:
        parts.append(f"at most {row['worker_concurrency']} per worker")
    return ", ".join(parts) + f", {row['waiting']} waiting"
