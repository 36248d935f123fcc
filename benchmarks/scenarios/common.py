"""What the scenarios share: the run context, engine start/wait helpers, table rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from typing import Any

STARTED = dt.datetime.now(dt.UTC)


@dataclasses.dataclass
class Context:
    quick: bool
    repeat: int
    workers: int = 2
    throughput_n: int = 200
    memory_n: int = 10_000
    fanout_n: int = 1_000
    deadline_scale: float = 1.0
    seed_runs: int = 1_000_000
    seed_open: int = 100_000
    keep_db: bool = False
    prune_runs: int = 240_000
    prune_batch: int = 500
    timers_n: int = 10_000
    timers_spreads: tuple[float, ...] = (60.0, 1.0)
    timers_lead: float | None = None
    timers_aged: bool = False
    timers_variants: tuple[str, ...] = ("in-place",)

    def log(self, message: str) -> None:
        print(f"  · {message}", flush=True)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def row(
    metric: str,
    engine: Any,
    baseline: Any = None,
    ratio: Any = None,
    unit: str = "",
    baseline_name: str = "",
) -> dict[str, Any]:
    return {
        "metric": metric,
        "engine": engine,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "ratio": ratio,
        "unit": unit,
    }


def start_workflow(workflow: type, instance_id: str, *args: Any) -> None:
    from durable_workflow import WorkflowStub

    WorkflowStub.make(workflow, instance_id).start(*args)


def raise_on_failed_tasks() -> None:
    """No task may fail in a benchmark: a failed workflow task would leave its run
    waiting forever (e.g. an engine bug), so stop at once with its error."""
    from durable_workflow.models import Task

    # Only this invocation's tasks: a seeded database (scenario ``aged``) holds failed
    # tasks of runs that failed months ago.
    failed = (
        Task.objects.filter(status="failed", updated_at__gte=STARTED)
        .values_list("task_type", "last_error")
        .first()
    )
    if failed:
        raise RuntimeError(f"a {failed[0]} task failed: {failed[1][-1500:]}")


def wait_completed(instance_ids: list[str], *, timeout: float, interval: float = 0.05) -> None:
    """Poll until every instance's current run is closed; raise on failure or timeout."""
    from durable_workflow.models import TERMINAL_RUN_STATUSES, WorkflowRun

    deadline = time.monotonic() + timeout
    pending = set(instance_ids)
    next_check = time.monotonic() + 1
    while pending:
        if time.monotonic() > next_check:
            raise_on_failed_tasks()
            next_check = time.monotonic() + 1
        # With the namespace, the lookup uses the (namespace, instance_id) index: the
        # aged scenario polls a table of a million runs.
        rows = WorkflowRun.objects.filter(
            namespace="default",
            instance_id__in=list(pending),
            status__in=list(TERMINAL_RUN_STATUSES),
        ).values_list("instance_id", "status")
        for instance_id, status in rows:
            if status != "completed":
                raise RuntimeError(f"workflow {instance_id} ended {status}")
            pending.discard(instance_id)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(pending)} of {len(instance_ids)} workflows not done in {timeout:.0f}s"
            )
        time.sleep(interval)


def wait_prefix_completed(
    prefix: str, count: int, *, timeout: float, interval: float = 0.1
) -> None:
    """Poll until ``count`` runs whose instance id starts with ``prefix`` completed."""
    from durable_workflow.models import WorkflowRun

    deadline = time.monotonic() + timeout
    while True:
        raise_on_failed_tasks()
        runs = WorkflowRun.objects.filter(instance__instance_id__startswith=prefix)
        done = runs.filter(status="completed").count()
        if done >= count:
            return
        bad = runs.filter(status__in=["failed", "cancelled", "terminated", "timed_out"]).count()
        if bad:
            raise RuntimeError(f"{bad} workflows with prefix {prefix} did not complete")
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done} of {count} workflows done after {timeout:.0f}s")
        time.sleep(interval)


def history_of(instance_id: str) -> list[tuple[str, dict[str, Any], float]]:
    """(event type, payload, recorded_at as epoch seconds) of the current run."""
    from durable_workflow.models import HistoryEvent, WorkflowRun

    run = (
        WorkflowRun.objects.filter(namespace="default", instance_id=instance_id)
        .order_by("-run_number")
        .first()
    )
    assert run is not None
    return [
        (kind, payload, at.timestamp())
        for kind, payload, at in HistoryEvent.objects.filter(run_id=run.id)
        .order_by("sequence")
        .values_list("event_type", "payload", "recorded_at")
    ]


def wait_redis_list(
    client: Any, key: str, count: int, *, timeout: float, interval: float = 0.02
) -> list[bytes]:
    deadline = time.monotonic() + timeout
    while client.llen(key) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"only {client.llen(key)} of {count} reports on {key} after {timeout:.0f}s"
            )
        time.sleep(interval)
    return client.lrange(key, 0, -1)
