"""The doctor's ``queue_limits`` check: each limited queue's limit, leases and waiters."""

from __future__ import annotations

from durable_workflow import queue_limits
from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext
from durable_workflow.store import work_queues

TITLE = "Limited work queues hand out their free slots"


def queue_usage(ctx: DoctorContext) -> dict[str, dict[str, int | None]]:
    """``{queue: {"concurrency", "leased", "waiting"}}`` of every limited queue."""
    declared = queue_limits.declared()
    used = work_queues.usage(sorted(declared), now=ctx.now)
    return {
        name: {
            "concurrency": declared[name].concurrency,
            "leased": used[name][0],
            "waiting": used[name][1],
        }
        for name in sorted(declared)
    }


def check_queue_limits(ctx: DoctorContext) -> CheckResult:
    usage = queue_usage(ctx)
    if not usage:
        return CheckResult("queue_limits", TITLE, OK, "no queue has a limit (QUEUES)")
    lines = [
        f'queue "{name}": {row["leased"]}/{row["concurrency"]} leased, {row["waiting"]} waiting'
        for name, row in usage.items()
    ]
    # Waiters beside a free slot: a wake-up was lost and the repair pass is not running.
    idle = [
        name
        for name, row in usage.items()
        if row["waiting"] and (row["leased"] or 0) < (row["concurrency"] or 0)
    ]
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
