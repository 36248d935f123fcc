"""Scenario ``prune``: retention on a database that has lived, while workers run steps.

A clone of the seeded database (``benchmarks/seed.py``) is brought up to the
engine's migrations; then, with real Celery workers running a steady stream of
sequential workflows (one at a time, the ``sequential`` scenario's engine side)
against it, rounds alternate a window without pruning and a window in which
``benchmarks.prune_job`` (what ``manage.py workflow_prune`` calls, in its own
process) deletes a share of the closed runs older than ``OLDER_THAN``. Measured:
runs pruned per minute (overall and per batch), history rows deleted per second,
the step latency in each kind of window, and what the database's backends wait on
(``pg_stat_activity`` and ungranted ``pg_locks`` sampled every 100 ms). Before the
rounds, one batch is deleted and rolled back twice: once to count and time its
statements, once under ``EXPLAIN (ANALYZE, BUFFERS)``.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import json
import math
import os
import subprocess
import sys
import threading
import time
from typing import Any

from benchmarks import config, stats
from benchmarks.scenarios.aged import clone_of_the_seed, using_database
from benchmarks.scenarios.common import Context, row
from benchmarks.scenarios.sequential import engine_once as sequence_once
from benchmarks.workers import check_alive, running_workers

#: Named after the harness's database, so two runs with their own ``DW_BENCH_PG_DB`` never
#: drop each other's clone.
PRUNE_DB = f"{config.PG_DB}_prune"
#: The seed's closed runs spread over a year: this keeps the last month's.
OLDER_THAN = "30d"
SAMPLE_EVERY = 0.1


class _Rollback(Exception):
    pass


class StepStream(threading.Thread):
    """Sequential workflows one after the other; each one's steps go to the window
    (``phase``) it started in."""

    def __init__(self) -> None:
        super().__init__(name="step-stream", daemon=True)
        self.phase = "warmup"
        self.samples: dict[str, list[float]] = collections.defaultdict(list)
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        from django.db import connections

        try:
            while not self._stop_event.is_set():
                phase = self.phase
                steps, _total = sequence_once(120)
                self.samples[phase] += steps
        except BaseException as exc:  # re-raised by the scenario
            self.error = exc
        finally:
            connections.close_all()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=150)


class WaitSampler(threading.Thread):
    """What the database's backends are doing, every ``SAMPLE_EVERY`` seconds, by window."""

    QUERY = """
        SELECT application_name, backend_type, state, wait_event_type, wait_event,
               (SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                WHERE NOT l.granted AND d.datname = %(db)s)
        FROM pg_stat_activity WHERE datname = %(db)s AND pid <> pg_backend_pid()
    """

    def __init__(self, database: str) -> None:
        super().__init__(name="wait-sampler", daemon=True)
        self.database = database
        self.phase = "warmup"
        self.samples: collections.Counter[str] = collections.Counter()
        self.waits: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self._stop_event = threading.Event()

    @staticmethod
    def role(application: str, backend: str) -> str:
        if backend != "client backend":
            return backend
        if application.startswith("dw-bench-bench"):
            return "worker"
        return application.removeprefix("dw-bench-") or "other"

    def run(self) -> None:
        import psycopg

        with psycopg.connect(config.pg_url(self.database), autocommit=True) as conn:
            while not self._stop_event.wait(SAMPLE_EVERY):
                phase = self.phase
                rows = conn.execute(self.QUERY, {"db": self.database}).fetchall()
                self.samples[phase] += 1
                waits = self.waits[phase]
                if rows and rows[0][5]:
                    waits["ungranted pg_locks"] += rows[0][5]
                for application, backend, state, kind, event, _ in rows:
                    if state not in ("active", "idle in transaction"):
                        continue
                    who = self.role(application or "", backend or "")
                    waits[f"{who}: {state}"] += 1
                    if kind:
                        waits[f"{who}: waiting {kind}/{event}"] += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def summary(self, phase: str) -> dict[str, Any]:
        return {"samples": self.samples[phase], "backends": dict(self.waits[phase].most_common())}


def _prepare(ctx: Context) -> dict[str, Any]:
    return clone_of_the_seed(ctx, PRUNE_DB)


def explain_batch(batch_size: int, now: dt.datetime) -> dict[str, Any]:
    """One batch of the oldest candidates deleted twice, rolled back both times: its
    statements timed, then each under ``EXPLAIN (ANALYZE, BUFFERS)`` in the same order
    (a statement's plan depends on what the ones before it deleted)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from durable_workflow.operations.prune import candidates, delete_runs, parse_age

    cutoff = now - parse_age(OLDER_THAN)
    with CaptureQueriesContext(connection) as selected:
        ids = [run.id for run in candidates(cutoff)[:batch_size]]
    with CaptureQueriesContext(connection) as captured:
        t0 = time.perf_counter()
        try:
            with transaction.atomic():
                rows = delete_runs(ids)
                elapsed = time.perf_counter() - t0
                raise _Rollback
        except _Rollback:
            pass
    statements = [
        q
        for q in captured.captured_queries
        if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN"))
    ]
    plans = []
    with transaction.atomic():
        for q in [*selected.captured_queries, *statements]:
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + q["sql"])
                plan = "\n".join(line for (line,) in cursor.fetchall())
            plans.append({"ms": float(q["time"]) * 1000, "sql": q["sql"][:400], "plan": plan})
        transaction.set_rollback(True)
    return {
        "runs": len(ids),
        "seconds": round(elapsed, 3),
        "statements": len(statements),
        "rows": dict(rows),
        "plans": plans,
    }


def _prune_round(ctx: Context, limit: int, now: dt.datetime) -> list[dict[str, Any]]:
    """Run the prune job to ``limit`` runs; its JSON lines, as they came."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(config.ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    command = [
        sys.executable,
        "-m",
        "benchmarks.prune_job",
        f"--older-than={OLDER_THAN}",
        f"--limit={limit}",
        f"--batch-size={ctx.prune_batch}",
        f"--now={now.isoformat()}",
    ]
    done = subprocess.run(
        command, cwd=config.ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"prune job failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _candidates(now: dt.datetime) -> int:
    from durable_workflow.operations.prune import candidates, parse_age

    return candidates(now - parse_age(OLDER_THAN)).count()


def run(ctx: Context) -> dict[str, Any]:
    prepared = _prepare(ctx)
    baseline_seconds = 20 if ctx.quick else 60
    # Retention counts from one instant for the whole scenario (the workload's own runs
    # close during it and are never candidates).
    now = dt.datetime.now(dt.UTC)
    lines: list[list[dict[str, Any]]] = []
    windows: list[dict[str, Any]] = []
    try:
        with using_database(PRUNE_DB):
            available = _candidates(now)
            total = min(available, ctx.prune_runs)
            per_round = math.ceil(total / ctx.repeat)
            ctx.log(f"{available:,} runs closed before {OLDER_THAN}; pruning {total:,}")
            explained = explain_batch(ctx.prune_batch, now)
            ctx.log(
                f"one batch of {explained['runs']}: {explained['statements']} statements, "
                f"{explained['seconds']:.2f} s (rolled back)"
            )
            stream, sampler = StepStream(), WaitSampler(PRUNE_DB)
            with running_workers(ctx.workers) as workers:
                stream.start()
                sampler.start()
                try:
                    time.sleep(10)  # warm-up: imports, connections, first tasks
                    for index in range(ctx.repeat):
                        check_alive(workers)
                        stream.phase = sampler.phase = "baseline"
                        t0 = time.monotonic()
                        time.sleep(baseline_seconds)
                        windows.append(_window("baseline", t0))
                        stream.phase = sampler.phase = "prune"
                        t0 = time.monotonic()
                        lines.append(_prune_round(ctx, per_round, now))
                        windows.append(_window("prune", t0))
                        pruned = lines[-1][-1].get("runs", 0)
                        ctx.log(
                            f"round {index + 1}/{ctx.repeat}: {pruned:,} runs in "
                            f"{windows[-1]['seconds']:.0f} s "
                            f"(load {windows[-1]['load_average'][0]:.1f})"
                        )
                        if stream.error is not None:
                            raise stream.error
                finally:
                    stream.stop()
                    sampler.stop()
            if stream.error is not None:
                raise stream.error
    finally:
        if not ctx.keep_db:
            from benchmarks import services

            services.drop_database(PRUNE_DB)
    return _report(ctx, prepared, explained, lines, windows, stream, sampler, available)


def _window(kind: str, t0: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "seconds": round(time.monotonic() - t0, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _batches(lines: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Per batch: runs per minute and seconds, from consecutive progress lines (the
    first batch of each round also pays the candidates' count, so it is left out).
    ``slowest_5pct_runs_per_minute``: the rate the slowest 5 % of batches stay under."""
    per_minute, seconds = [], []
    for round_lines in lines:
        marks = [line for line in round_lines if line["kind"] == "batch"]
        for before, after in itertools.pairwise(marks):
            spent = after["t"] - before["t"]
            runs = after["runs"] - before["runs"]
            if runs and spent > 0:
                per_minute.append(runs / spent * 60)
                seconds.append(spent)
    slowest = stats.percentile(per_minute, 5)
    return {
        "runs_per_minute": stats.summary(per_minute, digits=0),
        "slowest_5pct_runs_per_minute": None if slowest is None else round(slowest),
        "seconds": stats.summary(seconds),
    }


def _report(
    ctx: Context,
    prepared: dict[str, Any],
    explained: dict[str, Any],
    lines: list[list[dict[str, Any]]],
    windows: list[dict[str, Any]],
    stream: StepStream,
    sampler: WaitSampler,
    available: int,
) -> dict[str, Any]:
    pruned = sum(r[-1].get("runs", 0) for r in lines)
    prune_seconds = sum(w["seconds"] for w in windows if w["kind"] == "prune")
    rows_deleted: collections.Counter[str] = collections.Counter()
    for round_lines in lines:
        rows_deleted.update(round_lines[-1].get("rows", {}))
    overall = pruned / prune_seconds * 60 if prune_seconds else None
    history_per_second = rows_deleted["history_events"] / prune_seconds if prune_seconds else None
    batches = _batches(lines)
    step = {
        phase: stats.summary(stream.samples[phase], scale=1000) for phase in ("baseline", "prune")
    }
    p99 = {
        phase: stats.percentile([s * 1000 for s in stream.samples[phase]], 99)
        for phase in ("baseline", "prune")
    }
    loads = {
        kind: [w["load_average"][0] for w in windows if w["kind"] == kind]
        for kind in ("baseline", "prune")
    }
    rows = [
        row(
            f"runs pruned per minute (overall, batch {ctx.prune_batch})",
            overall,
            50_000,
            stats.ratio(overall, 50_000),
            "runs/min",
            "target",
        ),
        row("runs pruned per minute, per batch p50", batches["runs_per_minute"]["median"]),
        row(
            "runs pruned per minute, slowest 5 % of batches",
            batches["slowest_5pct_runs_per_minute"],
        ),
        row("history rows deleted per second", history_per_second, unit="rows/s"),
    ]
    for label, pick in (
        ("p50", lambda p: step[p]["median"]),
        ("p95", lambda p: step[p]["p95"]),
        ("p99", lambda p: p99[p]),
    ):
        rows.append(
            row(
                f"step latency {label} while pruning",
                pick("prune"),
                pick("baseline"),
                stats.ratio(pick("prune"), pick("baseline")),
                "ms",
                "no prune",
            )
        )
    ends = [round_lines[-1] for round_lines in lines]
    cpu = {
        side: sum(end.get(f"{side}_cpu_seconds", 0.0) for end in ends)
        for side in ("client", "backend")
    }
    cpu_ms_per_run = (cpu["client"] + cpu["backend"]) / pruned * 1000 if pruned else None
    rows.append(
        row(
            "CPU per run pruned: prune process + its PostgreSQL backend",
            cpu_ms_per_run,
            unit="ms",
        )
    )
    rows.append(
        row(
            "runs pruned per minute of CPU (what one free core would do)",
            60_000 / cpu_ms_per_run if cpu_ms_per_run else None,
            50_000,
            stats.ratio(60_000 / cpu_ms_per_run, 50_000) if cpu_ms_per_run else None,
            "runs/min",
            "target",
        )
    )
    waits = {phase: sampler.summary(phase) for phase in ("baseline", "prune")}
    rows.append(
        row(
            "samples of a worker backend waiting on a lock",
            _lock_waits(waits["prune"]),
            _lock_waits(waits["baseline"]),
            None,
            f"of {waits['prune']['samples']} / {waits['baseline']['samples']}",
            "no prune",
        )
    )
    return {
        "status": "ok",
        "seed": {"runs": ctx.seed_runs, "open": ctx.seed_open, **prepared},
        "older_than": OLDER_THAN,
        "candidates": available,
        "batch_size": ctx.prune_batch,
        "rounds": ctx.repeat,
        "pruned_runs": pruned,
        "prune_seconds": round(prune_seconds, 1),
        "runs_per_minute": round(overall) if overall else None,
        "history_rows_per_second": round(history_per_second) if history_per_second else None,
        "rows_deleted": dict(rows_deleted),
        "cpu_seconds": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_ms_per_run": round(cpu_ms_per_run, 3) if cpu_ms_per_run else None,
        "batches": batches,
        "step_latency_ms": step,
        "step_latency_p99_ms": p99,
        "load_average": {k: stats.summary(v, digits=2) for k, v in loads.items()},
        "windows": windows,
        "waits": waits,
        "one_batch": explained,
        "rows": rows,
    }


def _lock_waits(summary: dict[str, Any]) -> int:
    return sum(n for k, n in summary["backends"].items() if k.startswith("worker: waiting Lock/"))
