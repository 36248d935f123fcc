"""Scenario 7: worker RSS before and after many one-activity workflows.

Two fresh solo workers; RSS is read from /proc/<pid>/status (VmRSS). The
reference point is taken after a warm-up batch (first-use imports, connections
and caches are not a leak); the raw growth since the worker became ready is
reported too. Workflows are started in batches (one transaction each) and
each batch is awaited before the next. The same is done with 2-task Celery
chains on fresh workers as a reference.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.scenarios.common import Context, row, unique, wait_prefix_completed, wait_redis_list
from benchmarks.services import flush_redis
from benchmarks.workers import Worker, check_alive, running_workers

BATCH = 500


def _rss_mb(workers: list[Worker]) -> list[float]:
    return [round(w.rss_kb() / 1024, 2) for w in workers]


def _engine_batch(size: int, timeout: float) -> None:
    from django.db import transaction

    from benchmarks.workflows import OneStep
    from durable_workflow import WorkflowStub

    prefix = unique("mem") + "-"
    with transaction.atomic():
        for index in range(size):
            WorkflowStub.make(OneStep, f"{prefix}{index}").start()
    wait_prefix_completed(prefix, size, timeout=timeout, interval=0.25)


def _celery_batch(client: Any, size: int, timeout: float) -> None:
    from celery import chain

    from benchmarks.baseline_tasks import step

    key = unique("mem-chain")
    for _ in range(size):
        chain(step.s([]), step.s(report_key=key)).apply_async()
    wait_redis_list(client, key, size, timeout=timeout, interval=0.1)
    client.delete(key)


def _track(
    ctx: Context, label: str, batch_fn: Any, total: int, warmup: int, budget: float
) -> dict[str, Any]:
    with running_workers(ctx.workers) as workers:
        ready = _rss_mb(workers)
        batch_fn(warmup)
        warm = _rss_mb(workers)
        trajectory = [{"done": 0, "rss_mb": warm}]
        done = 0
        deadline = time.monotonic() + budget
        while done < total and time.monotonic() < deadline:
            check_alive(workers)
            size = min(BATCH, total - done)
            batch_fn(size)
            done += size
            trajectory.append({"done": done, "rss_mb": _rss_mb(workers)})
        final = trajectory[-1]["rss_mb"]
    growth = [round(f - w, 2) for f, w in zip(final, warm, strict=True)]
    raw = [round(f - r, 2) for f, r in zip(final, ready, strict=True)]
    slopes = []
    for index in range(len(final)):
        xs = [p["done"] for p in trajectory]
        ys = [p["rss_mb"][index] for p in trajectory]
        slopes.append(_slope(xs, ys) * 1000)
    per_1000 = round(max(slopes), 3) if slopes else None
    ctx.log(f"{label}: {done} done, RSS growth per worker {growth} MB after warm-up, raw {raw} MB")
    return {
        "workflows": done,
        "warmup": warmup,
        "rss_ready_mb": ready,
        "rss_after_warmup_mb": warm,
        "rss_final_mb": final,
        "growth_mb": growth,
        "growth_since_ready_mb": raw,
        "max_growth_mb": max(growth),
        "slope_mb_per_1000": per_1000,
        "projected_growth_10000_mb": round(per_1000 * 10, 2) if per_1000 is not None else None,
        "trajectory": trajectory,
    }


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.services import redis_client

    total = ctx.memory_n
    warmup = 100 if ctx.quick else 200
    budget = (150 if ctx.quick else 480) * ctx.deadline_scale
    engine = _track(ctx, "engine", lambda n: _engine_batch(n, 60 + n * 0.2), total, warmup, budget)
    flush_redis()
    client = redis_client()
    celery = _track(
        ctx, "celery", lambda n: _celery_batch(client, n, 60 + n * 0.05), total, warmup, budget / 4
    )
    complete = engine["workflows"] >= 10_000
    # Short of 10,000 (quick mode, or the time budget ran out): the larger of the
    # growth measured so far and the linear projection of its slope.
    basis = (
        engine["max_growth_mb"]
        if complete
        else max(engine["max_growth_mb"], engine["projected_growth_10000_mb"] or 0.0)
    )
    return {
        "status": "ok",
        "engine": engine,
        "celery": celery,
        "growth_basis": "measured"
        if complete
        else f"max(measured, slope x 10,000) over {engine['workflows']} workflows",
        "growth_10000_mb": basis,
        "rows": [
            row(
                f"worker RSS growth over {engine['workflows']} workflows (max of workers)",
                engine["max_growth_mb"],
                celery["max_growth_mb"],
                None,
                "MB",
                f"{celery['workflows']} chains",
            ),
            row(
                "RSS slope per 1,000 workflows",
                engine["slope_mb_per_1000"],
                celery["slope_mb_per_1000"],
                None,
                "MB",
                "chains",
            ),
            row(
                "worker RSS after warm-up / final",
                f"{max(engine['rss_after_warmup_mb'])} / {max(engine['rss_final_mb'])}",
                f"{max(celery['rss_after_warmup_mb'])} / {max(celery['rss_final_mb'])}",
                None,
                "MB",
                "chains",
            ),
        ],
    }
