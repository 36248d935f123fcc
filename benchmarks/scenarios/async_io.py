"""Async activities: many I/O-bound activities in one worker process, async vs sync.

One solo worker process (one Celery slot) runs a ``dw.all()`` of N activities that
each wait S seconds: ``time.sleep`` in a synchronous ``handle()`` (each holds the
slot: about N x S) against ``await asyncio.sleep`` in an async one (they wait
together on the process's event loop: about S plus the engine's own work per
activity). Reported: wall time from the client's call to ``WorkflowCompleted``,
activities per second, and the sync / async ratio. No outside baseline: the
comparison is the engine's two paths on the same worker.
"""

from __future__ import annotations

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
)
from benchmarks.workers import check_alive, running_workers

SLEEP_SECONDS = 0.2


def once(use_async: bool, n: int, timeout: float) -> float:
    from benchmarks.workflows import IOFanOut

    instance_id = unique("async-io" if use_async else "sync-io")
    t0 = time.time()
    start_workflow(IOFanOut, instance_id, use_async, n, SLEEP_SECONDS)
    wait_completed([instance_id], timeout=timeout, interval=0.05)
    done = next(at for kind, _, at in history_of(instance_id) if kind == "WorkflowCompleted")
    return done - t0


def run(ctx: Context) -> dict[str, Any]:
    n = 50 if ctx.quick else 100
    timeout = (n * SLEEP_SECONDS * 4 + 60) * ctx.deadline_scale
    sync_times: list[float] = []
    async_times: list[float] = []
    with running_workers(1) as workers:
        once(False, 5, timeout)  # warm-up, both paths
        once(True, 5, timeout)
        reps = min(ctx.repeat, 3)  # the sync side takes N x S each time
        for rep in range(reps):
            check_alive(workers)
            sync_times.append(once(False, n, timeout))
            async_times.append(once(True, n, timeout))
            ctx.log(
                f"rep {rep + 1}/{reps}: sync {sync_times[-1]:.2f} s, async {async_times[-1]:.2f} s"
            )
    sync_s, async_s = stats.summary(sync_times), stats.summary(async_times)
    ratio = stats.ratio(sync_s["median"], async_s["median"])
    per_second = {
        "sync": round(n / sync_s["median"], 1) if sync_s["median"] else None,
        "async": round(n / async_s["median"], 1) if async_s["median"] else None,
    }
    return {
        "status": "ok",
        "n": n,
        "sleep_seconds": SLEEP_SECONDS,
        "repetitions": len(sync_times),
        "sync_seconds": sync_s,
        "async_seconds": async_s,
        "activities_per_second": per_second,
        "ratio_sync_over_async": ratio,
        "rows": [
            row(
                f"{n} activities waiting {SLEEP_SECONDS} s, one process (wall time)",
                async_s["median"],
                sync_s["median"],
                stats.ratio(async_s["median"], sync_s["median"]),
                "s",
                "sync activities",
            )
        ],
    }
