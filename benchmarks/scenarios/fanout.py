"""Scenario 4: ``dw.all()`` of 1,000 activities vs a Celery chord of 1,000 tasks.

The engine side runs only when ``dw.all`` exists; until then the scenario
reports "not available" and still measures the chord baseline. Time: from the
client's call to the start of the last unit of work (the chord callback, the
workflow task that completes the run).
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks import stats
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


def chord_once(client: Any, n: int, timeout: float) -> float:
    from celery import chord

    from benchmarks.baseline_tasks import chord_done, chord_member

    key = unique("chord")
    t0 = time.time()
    chord([chord_member.s(i) for i in range(n)])(chord_done.s(key))
    report = json.loads(wait_redis_list(client, key, 1, timeout=timeout, interval=0.02)[0])
    if report["count"] != n:
        raise RuntimeError(f"chord callback saw {report['count']} results, expected {n}")
    return report["at"] - t0


def engine_once(n: int, timeout: float) -> float:
    from benchmarks.workflows import FanOut

    instance_id = unique("fan")
    t0 = time.time()
    start_workflow(FanOut, instance_id, n)
    wait_completed([instance_id], timeout=timeout, interval=0.05)
    done = next(at for kind, _, at in history_of(instance_id) if kind == "WorkflowCompleted")
    return done - t0


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.services import redis_client
    from benchmarks.workflows import HAS_ALL

    client = redis_client()
    n = ctx.fanout_n
    timeout = 120 * ctx.deadline_scale
    chord_times: list[float] = []
    engine_times: list[float] = []
    engine_error = None
    with running_workers(ctx.workers) as workers:
        chord_once(client, min(n, 50), timeout)  # warm-up
        if HAS_ALL:
            try:
                engine_once(min(n, 50), timeout)
            except Exception as exc:
                engine_error = f"{type(exc).__name__}: {exc}"
        reps = min(ctx.repeat, 3)  # a slow engine fan-out must not eat the time budget
        for rep in range(reps):
            check_alive(workers)
            chord_times.append(chord_once(client, n, timeout))
            if HAS_ALL and engine_error is None:
                try:
                    engine_times.append(engine_once(n, timeout * 3))
                except Exception as exc:
                    engine_error = f"{type(exc).__name__}: {exc}"
            ctx.log(
                f"rep {rep + 1}/{reps}: chord {chord_times[-1]:.2f} s"
                + (f", engine {engine_times[-1]:.2f} s" if len(engine_times) > rep else "")
            )
    chord_s = stats.summary(chord_times)
    result: dict[str, Any] = {"n": n, "repetitions": len(chord_times), "chord_seconds": chord_s}
    if not HAS_ALL:
        result.update(
            status="not_available",
            reason="the engine has no dw.all yet",
            rows=[
                row(
                    f"fan-out of {n} (wall time)",
                    "not available",
                    chord_s["median"],
                    None,
                    "s",
                    "celery chord",
                )
            ],
        )
        return result
    if engine_error or not engine_times:
        result.update(
            status="error",
            error=engine_error or "no engine run finished",
            rows=[
                row(
                    f"fan-out of {n} (wall time)",
                    "failed",
                    chord_s["median"],
                    None,
                    "s",
                    "celery chord",
                )
            ],
        )
        return result
    engine_s = stats.summary(engine_times)
    ratio = stats.ratio(engine_s["median"], chord_s["median"])
    result.update(
        status="ok",
        engine_seconds=engine_s,
        ratio=ratio,
        rows=[
            row(
                f"fan-out of {n} (wall time)",
                engine_s["median"],
                chord_s["median"],
                ratio,
                "s",
                "celery chord",
            )
        ],
    )
    return result
