"""``workflow_doctor``: small checks, each returning a ``CheckResult``.

``run_doctor()`` runs them in order; a check whose prerequisite failed is
reported as not checked instead of failing noisily, and a check that crashes
becomes an ``error`` result rather than stopping the others.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock
from durable_workflow.operations.doctor import (
    bulk_jobs,
    compatibility,
    configuration,
    infrastructure,
    pooler,
    queue_limits,
    work,
    workers,
    workflow_queues,
)
from durable_workflow.operations.doctor.result import (
    ERROR,
    OK,
    WARNING,
    Check,
    CheckResult,
    DoctorContext,
    worst,
)
from durable_workflow.operations.topology import topology

SCHEMA = "durable-workflow.doctor"
SCHEMA_VERSION = 1

#: (check, ids of the checks it needs to have passed), in the order they run.
CHECKS: list[tuple[Check, tuple[str, ...]]] = [
    (configuration.check_settings, ()),
    (infrastructure.check_database, ()),
    (infrastructure.check_migrations, ("database",)),
    (pooler.check_pooler, ("database",)),
    (infrastructure.check_celery_app, ("settings",)),
    (infrastructure.check_broker, ("celery_app",)),
    (workers.check_workers, ("celery_app", "database", "migrations")),
    (infrastructure.check_cache_locks, ()),
    (infrastructure.check_clock_skew, ("database",)),
    (configuration.check_payload_codec, ("settings",)),
    (configuration.check_structural_limits, ("settings",)),
    (configuration.check_type_keys, ("database", "migrations")),
    (configuration.check_beat_entries, ("celery_app", "database", "migrations")),
    (configuration.check_guardrails, ()),
    (work.check_stuck_tasks, ("database", "migrations")),
    (work.check_expired_leases, ("database", "migrations")),
    (work.check_overdue_timers, ("database", "migrations")),
    (work.check_run_deadlines, ("database", "migrations")),
    (work.check_resume_paths, ("database", "migrations")),
    (work.check_history_budget, ("database", "migrations")),
    (compatibility.check_worker_compatibility, ("database", "migrations")),
    (queue_limits.check_queue_limits, ("settings", "database", "migrations")),
    (bulk_jobs.check_bulk_jobs, ("database", "migrations")),
    (workflow_queues.check_workflow_queues, ("settings", "database", "migrations")),
]

#: Checks that need no broker round trip (the health view runs these).
FAST_CHECK_IDS = (
    "settings",
    "database",
    "migrations",
    "connection_pooler",
    "unregistered_types",
    "stuck_tasks",
    "expired_leases",
    "overdue_timers",
    "run_deadlines",
    "durable_resume_paths",
    "worker_compatibility",
    "queue_limits",
    "workflow_queues",
)


_IDS = {
    "check_type_keys": "unregistered_types",
    "check_resume_paths": "durable_resume_paths",
}


def check_id(check: Check) -> str:
    return _IDS.get(check.__name__, check.__name__.removeprefix("check_"))


TITLES = {
    "settings": "DURABLE_WORKFLOW settings",
    "database": "Database reachable",
    "migrations": "Migrations applied",
    "celery_app": "Celery app",
    "broker": "Broker reachable",
    "workers": "Workers consume every queue",
    "cache_locks": "Cache supports locks",
    "clock_skew": "Clock agrees with the database",
    "payload_codec": "Payload codec",
    "structural_limits": "Structural limits",
    "unregistered_types": "Type keys of open work are registered",
    "stuck_tasks": "No ready task left unclaimed",
    "expired_leases": "No expired lease left behind",
    "overdue_timers": "Timers fire on time",
    "run_deadlines": "Open runs are within their deadlines",
    "durable_resume_paths": "Every open run has a way to resume",
    "history_budget": "Histories stay within budget",
    "guardrails": "Workflow code replays deterministically",
    "worker_compatibility": compatibility.TITLE,
    "bulk_jobs": bulk_jobs.TITLE,
    "workflow_queues": workflow_queues.TITLE,
}


def run_checks(
    ctx: DoctorContext | None = None, *, only: tuple[str, ...] | None = None
) -> list[CheckResult]:
    ctx = ctx or DoctorContext()
    results: list[CheckResult] = []
    for check, needs in CHECKS:
        cid = check_id(check)
        if only is not None and cid not in only:
            continue
        failed = [n for n in needs if n in ctx.results and ctx.results[n].status == ERROR]
        if failed:
            result = CheckResult(
                cid,
                TITLES.get(cid, cid),
                WARNING,
                f"not checked: the {' and '.join(failed)} check failed",
                f"Fix {' and '.join(failed)} first.",
            )
        else:
            try:
                result = check(ctx)
            except Exception as exc:
                result = CheckResult(
                    cid,
                    TITLES.get(cid, cid),
                    ERROR,
                    f"the check itself failed: {type(exc).__name__}: {exc}",
                    "Fix the cause, or report it if it looks like a bug.",
                )
        ctx.results[cid] = result
        results.append(result)
    return results


def report(results: list[CheckResult], *, now: dt.datetime | None = None) -> dict[str, Any]:
    """The ``--json`` document (``durable_workflow/schemas/doctor.schema.json``)."""
    counts = {OK: 0, WARNING: 0, ERROR: 0}
    for result in results:
        counts[result.status] += 1
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "generated_at": (now or clock.now()).isoformat(),
        "status": worst(tuple(r.status for r in results)),
        "summary": counts,
        "checks": [r.as_dict() for r in results],
        "topology": topology(),
    }


def run_doctor(ctx: DoctorContext | None = None) -> dict[str, Any]:
    ctx = ctx or DoctorContext()
    return report(run_checks(ctx), now=ctx.now)


__all__ = [
    "CHECKS",
    "FAST_CHECK_IDS",
    "CheckResult",
    "DoctorContext",
    "report",
    "run_checks",
    "run_doctor",
]
