"""The doctor's ``workflow_queues`` check: each queue limiting its runs, its slots and
the runs waiting for one."""

from __future__ import annotations

from durable_workflow import queue_limits
from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext
from durable_workflow.store import workflow_queues

TITLE = "Queues that limit their runs hand out their free slots"


def workflow_queue_usage() -> dict[str, dict[str, int]]:
    """``{queue: {"limit", "running", "waiting"}}`` of every queue limiting its runs."""
    limits = queue_limits.workflow_limits()
    used = workflow_queues.usage(sorted(limits))
    return {
        name: {"limit": limits[name], "running": used[name][0], "waiting": used[name][1]}
        for name in sorted(limits)
    }


def check_workflow_queues(ctx: DoctorContext) -> CheckResult:
    usage = workflow_queue_usage()
    if not usage:
        return CheckResult(
            "workflow_queues", TITLE, OK, "no queue limits its runs (workflow_concurrency)"
        )
    lines = [
        f'workflow queue "{name}": {row["running"]}/{row["limit"]} running, '
        f"{row['waiting']} waiting"
        for name, row in usage.items()
    ]
    # Runs waiting beside a free slot: a wake-up was lost and the repair pass is not running.
    idle = [name for name, row in usage.items() if row["waiting"] and row["running"] < row["limit"]]
    if not idle:
        return CheckResult("workflow_queues", TITLE, OK, "; ".join(lines), details=usage)
    return CheckResult(
        "workflow_queues",
        TITLE,
        WARNING,
        "; ".join(lines) + f"; free slots but runs waiting on: {', '.join(idle)}",
        "Run the repair pass (the beat entry, or `manage.py workflow_repair`): it lets "
        "waiting runs start when their queue has free slots.",
        details=usage,
    )
