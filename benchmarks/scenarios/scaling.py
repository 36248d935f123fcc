"""Scenario ``scaling``: the throughput scenario's shape with 1, 2, 4 and 8 workers.

For each count of solo-pool worker processes, rounds of N one-activity
workflows started in one transaction (as in ``throughput``) alternate with N
2-task Celery chains. Around each engine round: CPU seconds of every worker
process and of the PostgreSQL backends serving the benchmark database (from
``/proc``), the machine's busy share (``/proc/stat``), Redis's own CPU (``INFO
cpu``), and the load average; after it, the database connections each worker
holds (``pg_stat_activity`` by ``application_name``, which the benchmark
settings set to the worker's name).

Then two worker groups that share nothing but PostgreSQL and Redis (separate
processes with their own Celery node names, ``groupa*`` and ``groupb*``) run
one round together, and the activity attempts say which group ran each one.

Last, the hot row: a fan-out of ``FANOUT`` members (every member's result is
settled under the parent run's lock) with 2 and with 8 workers, while a thread
samples ``pg_stat_activity`` every 10 ms: the share of the workers' backends
found waiting on a lock, and members settled per second.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks import config, physical, stats
from benchmarks.scenarios import throughput
from benchmarks.scenarios.common import Context, row

COUNTS = (1, 2, 4, 8)
FANOUT = 500


def _redis_cpu() -> float:
    from benchmarks.services import redis_client

    info = redis_client().info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _engine_round(n: int, pids: list[int], timeout: float) -> dict[str, Any]:
    with physical.admin() as adm:
        backends = physical.backend_pids(adm, config.PG_DB)
        cpu0, busy0, redis0 = physical.cpu_of(pids + backends), physical.machine_cpu(), _redis_cpu()
        outcome = throughput.engine_once(n, timeout)
        backends = sorted(set(backends) | set(physical.backend_pids(adm, config.PG_DB)))
        cpu1, busy1, redis1 = physical.cpu_of(pids + backends), physical.machine_cpu(), _redis_cpu()
        connections = physical.connections_by_application(adm, config.PG_DB)
    busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    workers = [cpu1[p] - cpu0.get(p, 0) for p in pids]
    postgresql = sum(cpu1[p] - cpu0.get(p, 0) for p in backends)
    return {
        **outcome,
        "machine_busy_share": round(busy, 3),
        "worker_cpu_ms_per_workflow": round(sum(workers) * 1000 / n, 2),
        "postgresql_cpu_ms_per_workflow": round(postgresql * 1000 / n, 2),
        "redis_cpu_ms_per_workflow": round((redis1 - redis0) * 1000 / n, 2),
        "worker_cpu_s": [round(w, 2) for w in workers],
        "connections_by_application": connections,
        "load_average": round(os.getloadavg()[0], 2),
    }


def _one_count(ctx: Context, count: int, client: Any) -> dict[str, Any]:
    from benchmarks.workers import check_alive, running_workers

    n = ctx.throughput_n
    timeout = max(60.0, n * 0.5) * ctx.deadline_scale
    rounds, chains = [], []
    with running_workers(count, prefix=f"scale{count}-") as workers:
        pids = [w.pid for w in workers]
        throughput.engine_once(min(n, 20), timeout)  # warm-up
        throughput.celery_once(client, min(n, 20), timeout)
        for _ in range(ctx.repeat):
            check_alive(workers)
            rounds.append(_engine_round(n, pids, timeout))
            chains.append(throughput.celery_once(client, n, timeout))
    engine = stats.summary([r["per_second"] for r in rounds], digits=1)
    celery = stats.summary([c["per_second"] for c in chains], digits=1)
    last = rounds[-1]
    worker_connections = {
        name: n for name, n in last["connections_by_application"].items() if "scale" in name
    }
    result = {
        "workers": count,
        "engine_workflows_per_second": engine,
        "celery_chains_per_second": celery,
        "ratio": stats.ratio(engine["median"], celery["median"]),
        "machine_busy_share": stats.median(r["machine_busy_share"] for r in rounds),
        "worker_cpu_ms_per_workflow": stats.median(r["worker_cpu_ms_per_workflow"] for r in rounds),
        "postgresql_cpu_ms_per_workflow": stats.median(
            r["postgresql_cpu_ms_per_workflow"] for r in rounds
        ),
        "redis_cpu_ms_per_workflow": stats.median(r["redis_cpu_ms_per_workflow"] for r in rounds),
        "connections_per_worker": stats.median(worker_connections.values()),
        "load_average": [r["load_average"] for r in rounds],
        "rounds": rounds,
    }
    ctx.log(
        f"{count} workers: {engine['median']} wf/s (chains {celery['median']}/s), machine busy "
        f"{result['machine_busy_share']:.0%}, worker CPU {result['worker_cpu_ms_per_workflow']} "
        f"ms/wf, PostgreSQL CPU {result['postgresql_cpu_ms_per_workflow']} ms/wf, "
        f"{result['connections_per_worker']} connections/worker, load {result['load_average']}"
    )
    return result


def _groups(ctx: Context) -> dict[str, Any]:
    """Two groups of two workers each, started separately; who ran what."""
    from django.utils import timezone

    from benchmarks.workers import running_workers
    from durable_workflow.models import ActivityAttempt, WorkerRegistration

    n = ctx.throughput_n
    timeout = max(60.0, n * 0.5) * ctx.deadline_scale
    with (
        running_workers(2, prefix="groupa", env=(("DW_BENCH_GROUP", "a"),)) as group_a,
        running_workers(2, prefix="groupb", env=(("DW_BENCH_GROUP", "b"),)) as group_b,
    ):
        group_of = {w.pid: "a" for w in group_a} | {w.pid: "b" for w in group_b}
        since = timezone.now()
        outcome = throughput.engine_once(n, timeout)
        pid_of = dict(WorkerRegistration.objects.values_list("worker_id", "pid"))
        owners = ActivityAttempt.objects.filter(started_at__gte=since).values_list(
            "lease_owner", flat=True
        )
        ran: dict[str, int] = {}
        for owner in owners:
            pid = pid_of.get(owner or "") or _pid_from(owner)
            group = group_of.get(pid, "other") if pid else "unknown"
            ran[group] = ran.get(group, 0) + 1
    ctx.log(f"two groups: {outcome['per_second']:.1f} wf/s, activities run by group {ran}")
    return {"per_second": round(outcome["per_second"], 1), "activities_by_group": ran}


def _fanout_locks(ctx: Context, count: int) -> dict[str, Any]:
    """One fan-out with ``count`` workers; how often their backends wait on a lock."""
    import threading
    import time

    from benchmarks.scenarios import fanout
    from benchmarks.workers import running_workers

    samples = {"busy": 0, "lock": 0}
    stop = threading.Event()

    def sample() -> None:
        with physical.admin() as adm:
            while not stop.is_set():
                rows = adm.execute(
                    "SELECT state, wait_event_type FROM pg_stat_activity WHERE datname = %s "
                    "AND application_name LIKE 'dw-bench-lock%%'",
                    [config.PG_DB],
                ).fetchall()
                for state, wait in rows:
                    samples["busy"] += int(state == "active")
                    samples["lock"] += int(state == "active" and wait == "Lock")
                time.sleep(0.01)

    with running_workers(count, prefix=f"lock{count}-"):
        fanout.engine_once(20, 120)  # warm-up
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            seconds = fanout.engine_once(FANOUT, 300 * ctx.deadline_scale)
        finally:
            stop.set()
            thread.join(5)
    share = samples["lock"] / samples["busy"] if samples["busy"] else None
    ctx.log(
        f"fan-out of {FANOUT} with {count} workers: {seconds:.2f} s, "
        f"{FANOUT / seconds:.0f} members/s, lock waits {share}"
    )
    return {
        "workers": count,
        "members": FANOUT,
        "seconds": round(seconds, 2),
        "members_per_second": round(FANOUT / seconds, 1),
        "active_backend_samples": samples["busy"],
        "lock_wait_share": None if share is None else round(share, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }


def _pid_from(owner: str | None) -> int | None:
    tail = (owner or "").rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.services import redis_client

    client = redis_client()
    counts = [_one_count(ctx, count, client) for count in COUNTS]
    groups = _groups(ctx)
    hot_row = [_fanout_locks(ctx, count) for count in (2, 8)]
    rows = []
    for result in counts:
        rows.append(
            row(
                f"{result['workers']} workers: completed per second",
                result["engine_workflows_per_second"]["median"],
                result["celery_chains_per_second"]["median"],
                result["ratio"],
                "/s",
                "2-task chains",
            )
        )
        rows.append(
            row(
                f"{result['workers']} workers: machine busy; CPU ms/workflow worker / PostgreSQL",
                f"{result['machine_busy_share']:.0%}; {result['worker_cpu_ms_per_workflow']} / "
                f"{result['postgresql_cpu_ms_per_workflow']}",
            )
        )
    rows.append(row("connections per worker", counts[-1]["connections_per_worker"]))
    rows.append(
        row("two groups: activities run by group", str(groups["activities_by_group"]), unit="")
    )
    for result in hot_row:
        rows.append(
            row(
                f"fan-out of {FANOUT}, {result['workers']} workers: members/s; lock-wait share",
                f"{result['members_per_second']}; {result['lock_wait_share']}",
            )
        )
    return {
        "status": "ok",
        "n": ctx.throughput_n,
        "counts": counts,
        "groups": groups,
        "fanout_hot_row": hot_row,
        "rows": rows,
    }
