"""Scenario 1: one workflow of 20 queued no-op activities vs a 20-task Celery chain vs DBOS.

Per-step latency samples:
* engine: the gap between consecutive ``ActivityScheduled`` events (and from the
  last one to ``WorkflowCompleted``), i.e. one activity task plus one workflow
  task, measured with the engine's own history timestamps;
* Celery chain: the gap between the start times of consecutive tasks (the first
  one from the client's ``apply_async``);
* DBOS: the gap between consecutive step returns inside the workflow body.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from benchmarks import stats
from benchmarks.dbos_client import DbosBaseline
from benchmarks.scenarios.common import (
    Context,
    history_of,
    row,
    start_workflow,
    unique,
    wait_completed,
    wait_redis_list,
)
from benchmarks.workers import check_alive, running_workers

STEPS = 20


PHASES = ("scheduled_to_started", "started_to_completed", "completed_to_next_task")


def engine_once(
    timeout: float, phases: dict[str, list[float]] | None = None
) -> tuple[list[float], float]:
    from benchmarks.workflows import Sequence

    instance_id = unique("seq")
    t0 = time.time()
    start_workflow(Sequence, instance_id, STEPS)
    wait_completed([instance_id], timeout=timeout, interval=0.02)
    events = history_of(instance_id)
    at: dict[str, list[float]] = {}
    for kind, _, when in events:
        at.setdefault(kind, []).append(when)
    scheduled = at["ActivityScheduled"]
    completed = at["WorkflowCompleted"][0]
    marks = [*scheduled, completed]
    assert len(scheduled) == STEPS, len(scheduled)
    if phases is not None:
        # Where a step's time goes, from the events each task records at its start.
        for i in range(STEPS):
            phases["scheduled_to_started"].append(at["ActivityStarted"][i] - scheduled[i])
            phases["started_to_completed"].append(
                at["ActivityCompleted"][i] - at["ActivityStarted"][i]
            )
            phases["completed_to_next_task"].append(marks[i + 1] - at["ActivityCompleted"][i])
    return [b - a for a, b in itertools.pairwise(marks)], completed - t0


def celery_once(redis_client: Any, timeout: float) -> tuple[list[float], float]:
    from celery import chain

    from benchmarks.baseline_tasks import step

    key = unique("chain")
    signatures = [step.s([]), *[step.s() for _ in range(STEPS - 2)], step.s(report_key=key)]
    t0 = time.time()
    chain(*signatures).apply_async()
    stamps = json.loads(wait_redis_list(redis_client, key, 1, timeout=timeout)[0])
    assert len(stamps) == STEPS, len(stamps)
    marks = [t0, *stamps]
    return [b - a for a, b in itertools.pairwise(marks)], stamps[-1] - t0


def dbos_once(dbos: DbosBaseline) -> tuple[list[float], float]:
    answer = dbos.steps(STEPS)
    stamps = answer["stamps"]
    return [b - a for a, b in itertools.pairwise(stamps)], answer["finished"] - answer["started"]


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.services import redis_client

    client = redis_client()
    samples: dict[str, list[float]] = {"engine": [], "celery": [], "dbos": []}
    totals: dict[str, list[float]] = {"engine": [], "celery": [], "dbos": []}
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    dbos_error = None
    with running_workers(ctx.workers) as workers:
        dbos_cm = DbosBaseline()
        try:
            dbos: DbosBaseline | None = dbos_cm.__enter__()
        except Exception as exc:  # the engine numbers still count without DBOS
            dbos, dbos_error = None, f"{type(exc).__name__}: {exc}"
            ctx.log(f"DBOS baseline unavailable: {dbos_error}")
        try:
            # Warm-up (imports, connections, first-task costs), not counted.
            engine_once(60)
            celery_once(client, 30)
            if dbos:
                dbos_once(dbos)
            for rep in range(ctx.repeat):
                check_alive(workers)
                for name, fn in (
                    ("engine", lambda: engine_once(60, phases)),
                    ("celery", lambda: celery_once(client, 30)),
                    ("dbos", (lambda: dbos_once(dbos)) if dbos else None),
                ):
                    if fn is None:
                        continue
                    steps, total = fn()
                    samples[name] += steps
                    totals[name].append(total)
                ctx.log(
                    f"rep {rep + 1}/{ctx.repeat}: engine {totals['engine'][-1] * 1000:.0f} ms, "
                    f"celery {totals['celery'][-1] * 1000:.0f} ms"
                    + (f", dbos {totals['dbos'][-1] * 1000:.0f} ms" if dbos else "")
                    + f" for {STEPS} steps"
                )
        finally:
            if dbos:
                dbos_cm.__exit__(None, None, None)

    step = {k: stats.summary(v, scale=1000) for k, v in samples.items()}
    total = {k: stats.summary(v, scale=1000) for k, v in totals.items()}
    per_step_e2e = {k: stats.summary([t / STEPS for t in v], scale=1000) for k, v in totals.items()}
    ratios = {
        "engine_vs_celery_p50": stats.ratio(step["engine"]["median"], step["celery"]["median"]),
        "engine_vs_celery_p95": stats.ratio(step["engine"]["p95"], step["celery"]["p95"]),
        "engine_vs_dbos_p50": stats.ratio(step["engine"]["median"], step["dbos"]["median"]),
        "engine_vs_celery_e2e": stats.ratio(total["engine"]["median"], total["celery"]["median"]),
    }
    rows = [
        row(
            "step latency p50",
            step["engine"]["median"],
            step["celery"]["median"],
            ratios["engine_vs_celery_p50"],
            "ms",
            "celery chain",
        ),
        row(
            "step latency p95",
            step["engine"]["p95"],
            step["celery"]["p95"],
            ratios["engine_vs_celery_p95"],
            "ms",
            "celery chain",
        ),
        row(
            "step latency p50",
            step["engine"]["median"],
            step["dbos"]["median"],
            ratios["engine_vs_dbos_p50"],
            "ms",
            "dbos step",
        ),
        row(
            f"{STEPS} steps end to end (median)",
            total["engine"]["median"],
            total["celery"]["median"],
            ratios["engine_vs_celery_e2e"],
            "ms",
            "celery chain",
        ),
    ]
    for name in PHASES:
        rows.append(
            row(
                f"engine step phase: {name.replace('_', ' ')} (p50)",
                stats.median(phases[name]) * 1000,
                unit="ms",
            )
        )
    return {
        "status": "ok",
        "steps": STEPS,
        "repetitions": ctx.repeat,
        "step_latency_ms": step,
        "end_to_end_ms": total,
        "end_to_end_per_step_ms": per_step_e2e,
        "ratios": ratios,
        "engine_step_phases_ms": {k: stats.summary(v, scale=1000) for k, v in phases.items()},
        "dbos_error": dbos_error,
        "rows": rows,
    }
