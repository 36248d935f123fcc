"""Scenario 2: N one-activity workflows started at once vs N 2-task Celery chains.

"At once": the N starts are made inside one transaction, so their first
workflow-task messages are published together when it commits; the clock starts
just before that commit. The Celery chains are published in a loop and the
clock starts before the first one. The end is the start time of the last unit
of work (the final workflow task's ``closed_at``, the last chain task's stamp).
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks import stats
from benchmarks.scenarios.common import Context, row, unique, wait_prefix_completed, wait_redis_list
from benchmarks.workers import check_alive, running_workers


def engine_once(n: int, timeout: float) -> dict[str, float]:
    from django.db import transaction
    from django.db.models import Max

    from benchmarks.workflows import OneStep
    from durable_workflow import WorkflowStub
    from durable_workflow.models import WorkflowRun

    prefix = unique("tp") + "-"
    started = time.perf_counter()
    with transaction.atomic():
        for index in range(n):
            WorkflowStub.make(OneStep, f"{prefix}{index}").start()
        start_seconds = time.perf_counter() - started
        t0 = time.time()
    wait_prefix_completed(prefix, n, timeout=timeout)
    last = WorkflowRun.objects.filter(instance__instance_id__startswith=prefix).aggregate(
        m=Max("closed_at")
    )["m"]
    elapsed = last.timestamp() - t0
    return {"elapsed": elapsed, "per_second": n / elapsed, "start_per_second": n / start_seconds}


def celery_once(redis_client: Any, n: int, timeout: float) -> dict[str, float]:
    from celery import chain

    from benchmarks.baseline_tasks import step

    key = unique("tp-chain")
    t0 = time.time()
    for _ in range(n):
        chain(step.s([]), step.s(report_key=key)).apply_async()
    reports = wait_redis_list(redis_client, key, n, timeout=timeout, interval=0.05)
    last = max(json.loads(r)[-1] for r in reports)
    elapsed = last - t0
    return {"elapsed": elapsed, "per_second": n / elapsed}


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.services import redis_client

    client = redis_client()
    n = ctx.throughput_n
    engine: list[dict[str, float]] = []
    celery: list[dict[str, float]] = []
    timeout = max(60.0, n * 0.5) * ctx.deadline_scale
    with running_workers(ctx.workers) as workers:
        engine_once(min(n, 20), timeout)  # warm-up
        celery_once(client, min(n, 20), timeout)
        for rep in range(ctx.repeat):
            check_alive(workers)
            engine.append(engine_once(n, timeout))
            celery.append(celery_once(client, n, timeout))
            ctx.log(
                f"rep {rep + 1}/{ctx.repeat}: engine {engine[-1]['per_second']:.1f} wf/s, "
                f"celery {celery[-1]['per_second']:.1f} chains/s"
            )
    e = stats.summary([r["per_second"] for r in engine], digits=1)
    c = stats.summary([r["per_second"] for r in celery], digits=1)
    starts = stats.summary([r["start_per_second"] for r in engine], digits=1)
    ratio = stats.ratio(e["median"], c["median"])
    return {
        "status": "ok",
        "n": n,
        "workers": ctx.workers,
        "repetitions": ctx.repeat,
        "engine_workflows_per_second": e,
        "celery_chains_per_second": c,
        "client_starts_per_second": starts,
        "ratio": ratio,
        "rows": [
            row(
                f"completed per second (N={n})",
                e["median"],
                c["median"],
                ratio,
                "/s",
                "2-task chains",
            ),
            row(
                "completed per second, worst rep",
                e["min"],
                c["min"],
                stats.ratio(e["min"], c["min"]),
                "/s",
                "2-task chains",
            ),
            row("client start() calls per second", starts["median"], unit="/s"),
        ],
    }
