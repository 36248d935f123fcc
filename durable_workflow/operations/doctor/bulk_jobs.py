"""The bulk jobs check: an open job whose progress stopped has lost its worker."""

from __future__ import annotations

from durable_workflow.operations import bulk
from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult, DoctorContext

TITLE = "Bulk jobs make progress"
#: Stalled jobs a finding lists by id.
SHOWN_JOBS = 10


def check_bulk_jobs(ctx: DoctorContext) -> CheckResult:
    after = bulk.stalled_after()
    jobs = bulk.stalled(now=ctx.now).order_by("updated_at")
    count = jobs.count()
    if not count:
        return CheckResult(
            "bulk_jobs", TITLE, OK, f"no open bulk job has stood still for {after:.0f} s"
        )
    shown = list(
        jobs.values("id", "operation", "status", "done", "skipped", "failed", "total")[:SHOWN_JOBS]
    )
    oldest = jobs.values_list("updated_at", flat=True).first()
    age = (ctx.now - oldest).total_seconds() if oldest else 0.0
    names = ", ".join(
        f"{j['id']} ({j['operation']}, {j['done'] + j['skipped'] + j['failed']}/{j['total']})"
        for j in shown
    )
    return CheckResult(
        "bulk_jobs",
        TITLE,
        WARNING,
        f"{count} open bulk job(s) made no progress for more than {after:.0f} s "
        f"(the oldest for {age:.0f} s): {names}",
        "The repair pass sends a stalled job's message again; check that it runs and "
        "that a worker consumes the Celery queue, or go on with one job in this shell: "
        "`python manage.py workflow_bulk --resume JOB`. No run is acted on twice.",
        details={
            "count": count,
            "stalled_after_seconds": after,
            "jobs": [{**j, "id": str(j["id"])} for j in shown],
        },
    )
