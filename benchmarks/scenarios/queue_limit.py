"""A limited work queue against an unlimited one: what the gate costs.

Two solo workers (two Celery slots) run a ``dw.all()`` of N no-op activities routed
to ``bench-open`` (no limit) and to ``bench-limited`` (``concurrency: 2``, as many
slots as the workers have, so the limit itself never binds), alternating repetition
by repetition. Then the open queue once more on workers with ``EAGER_ACTIVITIES``
off: a limited queue's attempts never take the eager path (no eager start, no
sibling batch; every attempt is a message, a counted claim and its own settle), so
that third side tells the gate's own cost from the batching it gives up.

Reported: wall time from the client's call to ``WorkflowCompleted``, activities per
second on each side, and the ratios limited / open and limited / open-without-eager.
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

NO_EAGER = (("DW_BENCH_EAGER_ACTIVITIES", "0"),)


def once(queue: str, n: int, timeout: float) -> float:
    from benchmarks.workflows import QueueFanOut

    instance_id = unique(queue)
    t0 = time.time()
    start_workflow(QueueFanOut, instance_id, queue, n)
    wait_completed([instance_id], timeout=timeout, interval=0.05)
    done = next(at for kind, _, at in history_of(instance_id) if kind == "WorkflowCompleted")
    return done - t0


def _sides(ctx: Context, n: int, timeout: float) -> dict[str, list[float]]:
    from benchmarks.workflows import LIMITED_QUEUE, OPEN_QUEUE

    queues = f"celery,{OPEN_QUEUE},{LIMITED_QUEUE}"
    times: dict[str, list[float]] = {"open": [], "limited": [], "open_no_eager": []}
    with running_workers(2, queues=queues) as workers:
        once(OPEN_QUEUE, 10, timeout)  # warm-up, both queues
        once(LIMITED_QUEUE, 10, timeout)
        for rep in range(ctx.repeat):
            check_alive(workers)
            order = ["open", "limited"] if rep % 2 == 0 else ["limited", "open"]
            for side in order:
                queue = OPEN_QUEUE if side == "open" else LIMITED_QUEUE
                times[side].append(once(queue, n, timeout))
            ctx.log(
                f"rep {rep + 1}/{ctx.repeat}: open {times['open'][-1]:.2f} s, "
                f"limited {times['limited'][-1]:.2f} s"
            )
    with running_workers(2, queues=queues, env=NO_EAGER) as workers:
        once(OPEN_QUEUE, 10, timeout)
        for rep in range(ctx.repeat):
            check_alive(workers)
            times["open_no_eager"].append(once(OPEN_QUEUE, n, timeout))
            ctx.log(
                f"rep {rep + 1}/{ctx.repeat}: open, eager off {times['open_no_eager'][-1]:.2f} s"
            )
    return times


def run(ctx: Context) -> dict[str, Any]:
    n = 100 if ctx.quick else 300
    timeout = (n * 0.5 + 60) * ctx.deadline_scale
    times = _sides(ctx, n, timeout)
    summary = {side: stats.summary(values) for side, values in times.items()}
    median = {side: summary[side]["median"] for side in summary}
    per_second = {side: round(n / value, 1) if value else None for side, value in median.items()}
    return {
        "status": "ok",
        "n": n,
        "concurrency_limit": 2,
        "repetitions": len(times["open"]),
        "wall_seconds": summary,
        "activities_per_second": per_second,
        "ratio_limited_over_open": stats.ratio(median["limited"], median["open"]),
        "ratio_limited_over_open_no_eager": stats.ratio(median["limited"], median["open_no_eager"]),
        "rows": [
            row(
                f"{n} no-op activities, 2 workers, queue limited to 2 (wall time)",
                median["limited"],
                median["open"],
                stats.ratio(median["limited"], median["open"]),
                "s",
                "unlimited queue",
            ),
            row(
                "the same against the unlimited queue without the eager path",
                median["limited"],
                median["open_no_eager"],
                stats.ratio(median["limited"], median["open_no_eager"]),
                "s",
                "unlimited, EAGER_ACTIVITIES off",
            ),
            row(
                "activities per second, limited queue",
                per_second["limited"],
                per_second["open"],
                stats.ratio(per_second["open"], per_second["limited"]),
                "/s",
                "unlimited queue",
            ),
        ],
    }
