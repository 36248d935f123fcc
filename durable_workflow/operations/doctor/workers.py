"""Do workers consume every queue the engine's tasks are routed to?"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.operations import queues
from durable_workflow.operations.doctor.result import (
    ERROR,
    OK,
    WARNING,
    CheckResult,
    DoctorContext,
    Status,
)
from durable_workflow.store import database


def _label(connection: str | None) -> str:
    return connection or "default"


def _active_queues(
    ctx: DoctorContext, connection: str | None
) -> Mapping[str, Sequence[Mapping[str, Any]]]:
    from durable_workflow.transport.celery import celery_app

    if ctx.active_queues is not None:
        return ctx.active_queues(connection) or {}
    inspector = celery_app(connection).control.inspect(timeout=ctx.inspect_timeout)
    return inspector.active_queues() or {}


def _registered(ctx: DoctorContext) -> dict[str, list[str]]:
    """Queues of worker processes that registered and heartbeat recently."""
    from durable_workflow.models import WorkerRegistration

    stale = dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
    rows = WorkerRegistration.objects.filter(
        status="active", last_heartbeat_at__gte=ctx.now - stale
    ).values_list("worker_id", "queues")
    return {worker_id: sorted(str(q) for q in queues or []) for worker_id, queues in rows}


def _registered_nodes(ctx: DoctorContext) -> int:
    """Celery nodes among the live registrations: the processes of one node (a prefork
    pool's children) share its direct queue, so one ``celery worker`` counts once."""
    from durable_workflow.models import WorkerRegistration

    stale = dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
    rows = WorkerRegistration.objects.filter(
        status="active", last_heartbeat_at__gte=ctx.now - stale
    ).values_list("worker_id", "direct_queue")
    return len({direct or worker for worker, direct in rows})


def _broker_states(ctx: DoctorContext) -> tuple[set[str], set[str]]:
    """(connections whose broker is unreachable, connections whose app runs eagerly)."""
    broker = ctx.results.get("broker")
    brokers = (broker.details.get("brokers") if broker else None) or {}
    unreachable = {name for name, info in brokers.items() if not info.get("reachable")}
    eager = {name for name, info in brokers.items() if info.get("eager")}
    return unreachable, eager


@dataclasses.dataclass
class _Survey:
    consumers: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    idle: list[str] = dataclasses.field(default_factory=list)
    stalled: list[str] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    eager: list[str] = dataclasses.field(default_factory=list)


def _survey(ctx: DoctorContext, registered: dict[str, list[str]]) -> _Survey:
    """Which queues the engine's tasks resolve to have no consumer (open tasks or not)."""
    unreachable, eager = _broker_states(ctx)
    configured, busy = queues.configured_scopes(), queues.open_task_scopes()
    survey = _Survey()
    for connection, wanted in queues.by_connection(configured | busy).items():
        if _label(connection) in eager:
            survey.eager.append(_label(connection))
            continue
        if _label(connection) in unreachable:
            survey.skipped.append(_label(connection))
            continue
        active = _active_queues(ctx, connection)
        served = {q["name"] for worker_queues in active.values() for q in worker_queues}
        if connection is None:  # registrations do not name their connection
            served |= {queue for names in registered.values() for queue in names}
        for worker, worker_queues in active.items():
            survey.consumers[worker] = sorted(q["name"] for q in worker_queues)
        for queue in wanted:
            if queue not in served:
                scope = f"{queue}" if connection is None else f"{connection}:{queue}"
                (survey.stalled if (connection, queue) in busy else survey.idle).append(scope)
    return survey


_START = "Start a worker for it: `celery -A <project> worker -Q <queue>[,<queue>...]`."


def check_workers(ctx: DoctorContext) -> CheckResult:
    title = "Workers consume every queue"
    registered = _registered(ctx)
    survey = _survey(ctx, registered)
    details = {
        "workers": survey.consumers,
        "registered_workers": registered,
        "no_consumer": sorted(survey.stalled + survey.idle),
        "skipped": survey.skipped,
        "eager": survey.eager,
    }

    def result(status: Status, message: str, next_step: str | None = None) -> CheckResult:
        return CheckResult("workers", title, status, message, next_step, details=details)

    if survey.stalled:
        waiting = ", ".join(sorted(survey.stalled))
        return result(ERROR, f"open tasks wait on queue(s) no worker consumes: {waiting}", _START)
    if survey.idle:
        idle = ", ".join(sorted(survey.idle))
        return result(WARNING, f"no worker consumes configured queue(s): {idle}", _START)
    if survey.skipped:
        skipped = ", ".join(survey.skipped)
        return result(
            WARNING,
            f"not checked for {skipped}: the broker is unreachable",
            "Fix the broker first.",
        )
    nodes = max(len(survey.consumers), _registered_nodes(ctx))
    if database.connection().vendor == "sqlite" and nodes > 1:
        return result(
            WARNING,
            f"{nodes} worker nodes share one SQLite database; writers will queue up",
            "Use PostgreSQL for more than one worker node.",
        )
    if survey.eager and not survey.consumers and not registered:
        eager = ", ".join(survey.eager)
        return result(OK, f"no worker needed for {eager}: tasks run in process (eager)")
    count = len(set(survey.consumers) | set(registered))
    return result(OK, f"{count} worker(s) cover every queue")
