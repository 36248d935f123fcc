"""The doctor's ``worker_compatibility`` check: runs waiting for a compatible worker."""

from __future__ import annotations

from durable_workflow.operations.compatibility import (
    WAITING_LABEL,
    waiting_for_compatible_worker,
)
from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext

TITLE = "Every ready task has a compatible worker"


def check_worker_compatibility(ctx: DoctorContext) -> CheckResult:
    view = waiting_for_compatible_worker(now=ctx.now)
    details = view.as_dict()
    if not view.waiting_count:
        here = ", ".join(view.supported) or "unmarked tasks only"
        return CheckResult(
            "worker_compatibility",
            TITLE,
            OK,
            f"no ready task requires a compatibility marker that no live worker supports "
            f"({len(view.fleet)} live registered worker(s); this process supports: {here})",
            details=details,
        )
    markers = ", ".join(view.blocked_markers)
    instances = ", ".join(dict.fromkeys(task.instance_id for task in view.waiting[:10]))
    return CheckResult(
        "worker_compatibility",
        TITLE,
        WARNING,
        f"{view.waiting_count} ready task(s) {WAITING_LABEL}: no live worker supports "
        f"compatibility marker(s) {markers} (e.g. {instances}); they are not stuck and need "
        "no repair",
        f"Start (or keep) workers whose COMPATIBILITY_SUPPORTED includes {markers}; the "
        "repair pass re-sends the tasks until one of them claims them.",
        details=details,
    )
