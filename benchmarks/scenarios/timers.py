"""Scenario ``timers``: how late due timers fire when many come due together.

N workflows (default 10,000) are started through the engine, each sleeping until a
due time of its own: spread evenly over one minute, and, in a second round, all in
one second. Real Celery workers (solo pool) on the Redis broker fire them from the
countdown messages the engine sent when each timer was scheduled, with the repair
pass running as deployed (``workflow_repair --loop``).

Per timer, from the engine's own rows:

* fired: ``Timer.fired_at`` (the timer task's clock when it took the timer, in the
  transaction that records ``TimerFired``) minus ``Timer.fire_at`` (the due time);
* resumed: the run's ``closed_at`` (the workflow task after the timer, which ran the
  body on from the timer and completed it) minus ``fire_at``.

Every timer is scheduled before its round's first due time (the lead is checked, not
assumed). Around the window: the machine's busy share (``/proc/stat``), CPU seconds of
the workers, their PostgreSQL backends, the repair loop and Redis, and the load
average. With ``--timers-aged`` the same rounds run again on a clone of the seeded
database (``--seed-runs``/``--seed-open``), whose open runs' timers stay pending.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import config, physical, stats
from benchmarks.scenarios.aged import clone_of_the_seed, using_database
from benchmarks.scenarios.common import Context, raise_on_failed_tasks, row, unique

TYPE = "bench.sleep-until"
START_BATCH = 100  # starts per transaction: their messages go out at each commit
STARTERS = 8


PROBE = 200  # workflows of the warm-up that also measures how fast timers get scheduled


def _lead(ctx: Context, n: int, per_second: float) -> float:
    """Seconds from the first start to the first due time: time to start ``n``
    workflows and run their first workflow tasks at the rate the probe measured, with
    a quarter more and 20 s to spare (``--timers-lead`` overrides it)."""
    return ctx.timers_lead or 1.25 * n / per_second + 20


def _probe() -> float:
    """A warm-up round of ``PROBE`` timers due 5 s after they are all scheduled; returns
    how many workflows per second were started and had their timer scheduled."""
    from django.utils import timezone

    since = timezone.now()
    t0 = time.monotonic()
    dues = [time.time() + 0.05 * PROBE + 5] * PROBE
    _start_all(unique("probe") + "-", dues)
    _wait(since, "scheduled", PROBE, until=time.time() + 600, what="probe timers", every=0.2)
    per_second = PROBE / (time.monotonic() - t0)
    _wait(since, "completed", PROBE, until=time.time() + 600, what="probe completed")
    return per_second


@contextlib.contextmanager
def _repair_loop() -> Iterator[Any]:
    """``workflow_repair --loop`` for the database the scenario points at, as deployed."""
    from benchmarks.workers import spawn, stop_process

    log = config.RESULTS_DIR / "logs" / "timers-repair.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(config.ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "DW_BENCH_WORKER_NAME": "repair",
        "DW_BENCH_ADMIN": "0",
    }
    process = spawn([sys.executable, "-m", "django", "workflow_repair", "--loop"], log=log, env=env)
    try:
        yield process
    finally:
        stop_process(process)


def _start_all(prefix: str, dues: list[float]) -> float:
    """Start one workflow per due time, from ``STARTERS`` threads (a start is mostly
    waiting on its round trips); returns the seconds it took."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    batches = [range(i, min(i + START_BATCH, len(dues))) for i in range(0, len(dues), START_BATCH)]
    with ThreadPoolExecutor(STARTERS) as pool:
        list(pool.map(lambda batch: _start_batch(prefix, dues, batch), batches))
    return time.monotonic() - t0


def _start_batch(prefix: str, dues: list[float], batch: range) -> None:
    from django.db import connections, transaction

    from benchmarks.workflows import SleepUntil
    from durable_workflow import WorkflowStub

    try:
        with transaction.atomic():
            for index in batch:
                WorkflowStub.make(SleepUntil, f"{prefix}{index}").start(dues[index])
    finally:
        connections.close_all()  # this thread's connection


def _count(since: Any, status: str) -> int:
    """Runs of the round with ``status``; ``"scheduled"``: runs whose timer exists."""
    from durable_workflow.models import Timer, WorkflowRun

    if status == "scheduled":
        return Timer.objects.filter(run__workflow_type=TYPE, run__created_at__gte=since).count()
    return WorkflowRun.objects.filter(
        workflow_type=TYPE, status=status, created_at__gte=since
    ).count()


def _wait(since: Any, status: str, n: int, *, until: float, what: str, every: float = 1.0) -> None:
    """Poll (once a second: the poll loads the database it measures) until ``n`` of the
    round's runs have ``status``."""
    while True:
        raise_on_failed_tasks()
        done = _count(since, status)
        if done >= n:
            return
        if time.time() > until:
            raise TimeoutError(f"{what}: {done} of {n} after the deadline")
        time.sleep(every)


class _Usage:
    """CPU of the machine and of the processes serving a round, between two readings."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def _read(self) -> tuple[dict[int, float], tuple[int, int], float]:
        from benchmarks.scenarios.scaling import _redis_cpu

        with physical.admin() as adm:
            backends = physical.backend_pids(adm, os.environ.get("DW_BENCH_PG_DB", config.PG_DB))
        self.backends = sorted(set(getattr(self, "backends", [])) | set(backends))
        return physical.cpu_of(self.pids + self.backends), physical.machine_cpu(), _redis_cpu()

    def __enter__(self) -> _Usage:
        self.before = self._read()
        self.load_before = os.getloadavg()[0]
        return self

    def stop(self, n: int) -> dict[str, Any]:
        cpu1, busy1, redis1 = self._read()
        cpu0, busy0, redis0 = self.before
        share = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
        workers = sum(cpu1[p] - cpu0.get(p, 0) for p in self.pids)
        backends = sum(cpu1[p] - cpu0.get(p, 0) for p in self.backends)
        return {
            "machine_busy_share": round(share, 3),
            "workers_cpu_ms_per_timer": round(workers * 1000 / n, 2),
            "postgresql_cpu_ms_per_timer": round(backends * 1000 / n, 2),
            "redis_cpu_ms_per_timer": round((redis1 - redis0) * 1000 / n, 2),
            "load_average": [round(self.load_before, 2), round(os.getloadavg()[0], 2)],
        }

    def __exit__(self, *exc: object) -> None:
        pass


def _lateness(since: Any) -> dict[str, Any]:
    """Per timer of the round: fired and resumed lateness, and how far ahead it was set."""
    from durable_workflow.models import Task, Timer

    rows = list(
        Timer.objects.filter(run__workflow_type=TYPE, run__created_at__gte=since).values_list(
            "fire_at", "fired_at", "run__closed_at", "created_at"
        )
    )
    fired = [(f - due).total_seconds() for due, f, _c, _s in rows if f is not None]
    resumed = [(c - due).total_seconds() for due, _f, c, _s in rows if c is not None]
    ahead = [(due - s).total_seconds() for due, _f, _c, s in rows]
    dues = [due.timestamp() for due, *_ in rows]
    resent = Task.objects.filter(
        task_type="timer", run__workflow_type=TYPE, run__created_at__gte=since, dispatch_count__gt=1
    ).count()
    return {
        "fired_s": stats.summary(fired, digits=3) | {"p99": _p(fired, 99)},
        "resumed_s": stats.summary(resumed, digits=3) | {"p99": _p(resumed, 99)},
        "scheduled_ahead_min_s": round(min(ahead), 2) if ahead else None,
        "due_span_s": round(max(dues) - min(dues), 3) if dues else None,
        "timer_tasks_resent_by_repair": resent,
        "timers": len(rows),
    }


def _due_query_plan() -> dict[str, Any]:
    """The repair pass's question for due ready tasks (``tasks.due_for_redispatch``),
    asked once in the middle of the window, timed, with its plan."""
    from benchmarks import aged_ops
    from durable_workflow import clock
    from durable_workflow.conf import get_settings
    from durable_workflow.store import tasks

    settings = get_settings()

    def ask() -> None:
        tasks.due_for_redispatch(
            now=clock.now(),
            after_seconds=settings.REDISPATCH_AFTER_SECONDS,
            max_backoff=settings.REDISPATCH_MAX_BACKOFF_SECONDS,
            limit=settings.REPAIR_SCAN_LIMIT,
        )

    return aged_ops.timed(ask, rounds=1)


def _p(values: list[float], q: float) -> float | None:
    value = stats.percentile(values, q)
    return None if value is None else round(value, 3)


def _round(ctx: Context, n: int, spread: float, workers: list[Any], repair: Any) -> dict[str, Any]:
    from django.utils import timezone

    per_second = _probe()
    since = timezone.now()
    lead = _lead(ctx, n, per_second)
    window = time.time() + lead
    dues = [window + spread * index / n for index in range(n)]
    started_in = _start_all(unique("timer") + "-", dues)
    ctx.log(f"{n} started in {started_in:.0f} s; waiting for their timers")
    _wait(since, "scheduled", n, until=window, what="timers scheduled before the first due time")
    ahead = window - time.time()
    time.sleep(max(0.0, ahead - 1))
    with _Usage([w.pid for w in workers] + [repair.pid]) as usage:
        time.sleep(1 + spread / 2)
        due_query = _due_query_plan()
        try:
            _wait(since, "completed", n, until=window + spread + max(300.0, n / 5), what="drain")
            unfinished = 0
        except TimeoutError as exc:  # report what fired: the late ones are the finding
            ctx.log(f"{exc}; measured as far as it got")
            unfinished = n - _count(since, "completed")
        used = usage.stop(n)
    result = {"timers": n, "spread_s": spread, "lead_s": round(lead, 1)}
    result["probe_scheduled_per_second"] = round(per_second, 1)
    result |= {"start_seconds": round(started_in, 1), "ready_ahead_s": round(ahead, 1)}
    result |= _lateness(since) | used | {"due_query_mid_window": due_query}
    result["unfinished_at_deadline"] = unfinished
    fired, resumed = result["fired_s"], result["resumed_s"]
    ctx.log(
        f"spread {spread:g} s: fired late p50 {fired['median']} p95 {fired['p95']} p99 "
        f"{fired['p99']} max {fired['max']} s; resumed p50 {resumed['median']} p99 "
        f"{resumed['p99']} s; busy {used['machine_busy_share']:.0%}, load {used['load_average']}"
    )
    return result


#: How a fired timer wakes its workflow: in the timer's own transaction where it may
#: (the default), or through a workflow task's message (``EAGER_WORKFLOW_TASKS`` off,
#: which for this workflow of timers alone changes nothing else).
VARIANTS = {"in-place": "1", "message": "0"}


def _side(ctx: Context, side: str) -> list[dict[str, Any]]:
    from benchmarks.services import flush_redis
    from benchmarks.workers import check_alive, running_workers

    rounds = []
    n = ctx.timers_n
    for variant in ctx.timers_variants:
        env = (("DW_BENCH_EAGER_WORKFLOW_TASKS", VARIANTS[variant]),)
        with (
            running_workers(ctx.workers, prefix="timers", env=env) as workers,
            _repair_loop() as repair,
        ):
            for spread in ctx.timers_spreads:
                check_alive(workers)
                ctx.log(f"{side}, {variant}: {n:,} timers due over {spread:g} s")
                one = _round(ctx, n, spread, workers, repair)
                rounds.append({"side": side, "variant": variant, "workers": ctx.workers} | one)
        flush_redis()
    return rounds


def run(ctx: Context) -> dict[str, Any]:
    from django.db import connection

    sides = [("empty", connection.settings_dict["NAME"])]
    aged_db = f"{config.PG_DB}_aged"
    if ctx.timers_aged:
        clone_of_the_seed(ctx, aged_db)
        sides.append(("aged", aged_db))
    rounds: list[dict[str, Any]] = []
    try:
        for side, name in sides:
            with using_database(name):
                rounds += _side(ctx, side)
    finally:
        if ctx.timers_aged and not ctx.keep_db:
            from benchmarks import services

            services.drop_database(aged_db)
    rows = [
        row(
            f"{r['side']}, {r['variant']}: {r['timers']:,} timers due over {r['spread_s']:g} s, "
            "fired late "
            f"p50/p95/p99/max (s), load {r['load_average'][1]}",
            r["fired_s"]["p99"],
            None,
            None,
            f"s p99 (p50 {r['fired_s']['median']}, p95 {r['fired_s']['p95']}, "
            f"max {r['fired_s']['max']}; resumed p99 {r['resumed_s']['p99']})",
        )
        for r in rounds
    ]
    seed_info = {"runs": ctx.seed_runs, "open": ctx.seed_open} if ctx.timers_aged else None
    return {"status": "ok", "rounds": rounds, "seed": seed_info, "rows": rows}
