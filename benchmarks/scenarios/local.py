"""Scenario 3: 20 local-activity steps vs 20 DBOS steps.

The engine side runs only when ``dw.local_activity`` exists; until then the
scenario reports "not available" and still measures the DBOS baseline.
Per-step time for both: end to end divided by the number of steps. The two
alternate, repetition by repetition, on the same worker processes and DBOS process.
"""

from __future__ import annotations

import itertools
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
)
from benchmarks.workers import running_workers

STEPS = 20


def _dbos_samples(ctx: Context) -> tuple[list[float], list[float], str]:
    per_step, totals = [], []
    with DbosBaseline() as dbos:
        dbos.steps(STEPS)  # warm-up
        for _ in range(ctx.repeat):
            answer = dbos.steps(STEPS)
            stamps = answer["stamps"]
            per_step += [b - a for a, b in itertools.pairwise(stamps)]
            totals.append(answer["finished"] - answer["started"])
        return per_step, totals, dbos.version


def _engine_once() -> float:
    from benchmarks.workflows import LocalSteps

    instance_id = unique("local")
    t0 = time.time()
    start_workflow(LocalSteps, instance_id, STEPS)
    wait_completed([instance_id], timeout=60, interval=0.01)
    events = history_of(instance_id)
    return next(at for kind, _, at in events if kind == "WorkflowCompleted") - t0


def _alternating(ctx: Context) -> tuple[list[float], list[float], list[float], str]:
    """DBOS and the engine repetition by repetition (a change of load between two
    halves of the scenario would land in the ratio): DBOS's per-step gaps and end-to-end
    times, then the engine's end-to-end times."""
    per_step, dbos_totals, engine_totals = [], [], []
    with DbosBaseline() as dbos, running_workers(ctx.workers):
        dbos.steps(STEPS)  # warm-ups
        _engine_once()
        for _ in range(ctx.repeat):
            answer = dbos.steps(STEPS)
            stamps = answer["stamps"]
            per_step += [b - a for a, b in itertools.pairwise(stamps)]
            dbos_totals.append(answer["finished"] - answer["started"])
            engine_totals.append(_engine_once())
        return per_step, dbos_totals, engine_totals, dbos.version


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.workflows import HAS_LOCAL_ACTIVITY

    if HAS_LOCAL_ACTIVITY:
        dbos_steps, dbos_totals, engine_totals, version = _alternating(ctx)
    else:
        dbos_steps, dbos_totals, version = _dbos_samples(ctx)
    dbos_step = stats.summary(dbos_steps, scale=1000)
    dbos_per_step = stats.summary([t / STEPS for t in dbos_totals], scale=1000)
    result: dict[str, Any] = {
        "steps": STEPS,
        "dbos_version": version,
        "dbos_step_latency_ms": dbos_step,
        "dbos_end_to_end_per_step_ms": dbos_per_step,
    }
    if not HAS_LOCAL_ACTIVITY:
        result.update(
            status="not_available",
            reason="the engine has no dw.local_activity yet",
            rows=[
                row(
                    "local step (end to end / 20)",
                    "not available",
                    dbos_per_step["median"],
                    None,
                    "ms",
                    "dbos step",
                )
            ],
        )
        return result
    engine = stats.summary([t / STEPS for t in engine_totals], scale=1000)
    ratio = stats.ratio(engine["median"], dbos_per_step["median"])
    result.update(
        status="ok",
        engine_end_to_end_per_step_ms=engine,
        ratio=ratio,
        rows=[
            row(
                "local step (end to end / 20)",
                engine["median"],
                dbos_per_step["median"],
                ratio,
                "ms",
                "dbos step",
            )
        ],
    )
    return result
