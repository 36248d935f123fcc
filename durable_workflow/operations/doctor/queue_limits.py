"""The doctor's ``queue_limits`` check: each limited queue's limits, leases, rate window
and waiters."""

from __future__ import annotations

from typing import Any

from durable_workflow import queue_limits
from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext
from durable_workflow.store import work_queues

TITLE = "Limited work queues hand out their free slots"


def queue_usage(ctx: DoctorContext) -> dict[str, dict[str, Any]]:
    """``{queue: {limits..., "leased", "waiting", "waiting_by_reason", "woken",
    "rate_starts_in_window"}}`` of every limited queue."""
    declared = queue_limits.declared()
    windows = {name: q.rate.period for name, q in declared.items() if q.rate is not None}
    used = work_queues.usage(sorted(declared), now=ctx.now, windows=windows)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(declared):
        limit, usage = declared[name], used[name]
        out[name] = {
            "concurrency": limit.concurrency,
            "rate": None if limit.rate is None else str(limit.rate),
            "worker_concurrency": limit.worker_concurrency,
            "leased": usage.leased,
            "waiting": usage.waiting,
            "waiting_by_reason": {
                queue_limits.REASONS[reason]: count
                for reason, count in usage.waiting_by_reason.items()
            },
            "woken": usage.woken,
            "rate_starts_in_window": usage.starts_in_window if limit.rate else None,
        }
    return out


def _line(name: str, row: dict[str, Any]) -> str:
    leased = f"{row['leased']}/{row['concurrency']}" if row["concurrency"] else str(row["leased"])
    parts = [f'queue "{name}": {leased} leased']
    if row["rate"]:
        parts.append(f"{row['rate_starts_in_window']} started in the rate window ({row['rate']})")
    if row["worker_concurrency"]:
        parts.append(f"at most {row['worker_concurrency']} per worker")
    return ", ".join(parts) + f", {row['waiting']} waiting"


def _idle(row: dict[str, Any]) -> bool:
    """Waiters beside room they could use: a wake-up was lost, no repair pass runs."""
    if not row["waiting"] or row["woken"]:
        return False
    if row["concurrency"] and row["leased"] >= row["concurrency"]:
        return False
    if row["rate"]:
        limit = queue_limits.parse_rate(row["rate"]).limit
        if row["rate_starts_in_window"] >= limit:
            return False
    return not row["worker_concurrency"] or row["leased"] == 0


def check_queue_limits(ctx: DoctorContext) -> CheckResult:
    usage = queue_usage(ctx)
    if not usage:
        return CheckResult("queue_limits", TITLE, OK, "no queue has a limit (QUEUES)")
    lines = [_line(name, row) for name, row in usage.items()]
    idle = [name for name, row in usage.items() if _idle(row)]
    if not idle:
        return CheckResult("queue_limits", TITLE, OK, "; ".join(lines), details=usage)
    return CheckResult(
        "queue_limits",
        TITLE,
        WARNING,
        "; ".join(lines) + f"; free slots but tasks waiting on: {', '.join(idle)}",
        "Run the repair pass (the beat entry, or `manage.py workflow_repair`): it sends "
        "waiting tasks when their queue has free slots.",
        details=usage,
    )
