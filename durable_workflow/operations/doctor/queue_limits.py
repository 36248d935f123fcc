"""The doctor's ``queue_limits`` check: each limited queue's limits, leases, rate window
and waiters."""

from __future__ import annotations

from typing import Any

from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext
from durable_workflow.operations.queue_limits import one_line, queue_report

TITLE = "Limited work queues hand out their free slots"


def _idle(row: dict[str, Any]) -> bool:
    """Waiters beside room they could use: a wake-up was lost, no repair pass runs."""
    if not row["waiting"] or row["woken"]:
        return False
    if row["concurrency"] and row["leased"] >= row["concurrency"]:
        return False
    if row["rate"] and row["rate_starts_in_window"] >= row["rate_limit"]:
        return False
    return not row["worker_concurrency"] or row["leased"] == 0


def check_queue_limits(ctx: DoctorContext) -> CheckResult:
    usage = queue_report(ctx.now)
    if not usage:
        return CheckResult("queue_limits", TITLE, OK, "no queue has a limit (QUEUES)")
    lines = [one_line(name, row) for name, row in usage.items()]
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
