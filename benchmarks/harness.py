"""Orchestration: services, databases, scenarios in order, the table and the JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import time
import traceback
from collections.abc import Callable
from typing import Any

from benchmarks import config, services, workers
from benchmarks.report import evaluate_targets, print_table
from benchmarks.scenarios import ORDER
from benchmarks.scenarios.common import Context

OPT_IN = {"aged", "prune", "timers"}
NEEDS_WORKERS = {
    "sequential",
    "throughput",
    "local",
    "fanout",
    "async_io",
    "queue_limit",
    "memory",
    "floor",
    "scaling",
    "aged",
    "prune",
    "timers",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="durable_workflow vs bare Celery and DBOS, on the local PostgreSQL and Redis.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes, fewer repetitions (~4 min)"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        choices=ORDER,
        metavar="NAME",
        help=f"run only these (repeatable): {', '.join(ORDER)}",
    )
    parser.add_argument("--repeat", type=int, help="repetitions per scenario (default 5, quick 3)")
    parser.add_argument(
        "--workers", type=int, default=2, help="solo-pool worker processes (default 2)"
    )
    parser.add_argument(
        "--throughput-n", type=int, help="workflows per throughput round (default 200, quick 50)"
    )
    parser.add_argument(
        "--memory-n", type=int, help="workflows for the RSS scenario (default 10000, quick 1000)"
    )
    parser.add_argument(
        "--db-connections",
        choices=config.DB_CONNECTION_MODES,
        default=config.DB_CONNECTIONS,
        help="how workers hold database connections (default reuse; see README)",
    )
    parser.add_argument(
        "--output", default=str(config.RESULTS_DIR / "latest.json"), help="JSON result path"
    )
    parser.add_argument(
        "--keep-db", action="store_true", help="do not drop the benchmark database at the end"
    )
    parser.add_argument(
        "--seed-runs",
        type=int,
        default=1_000_000,
        help="aged: closed runs in the seeded database (default 1,000,000)",
    )
    parser.add_argument(
        "--seed-open",
        type=int,
        default=100_000,
        help="aged: open runs waiting on timers and signals (default 100,000)",
    )
    parser.add_argument(
        "--prune-runs",
        type=int,
        default=240_000,
        help="prune: closed runs to delete, over --repeat rounds (default 240,000)",
    )
    parser.add_argument(
        "--prune-batch", type=int, default=500, help="prune: runs per transaction (default 500)"
    )
    parser.add_argument(
        "--timers-n", type=int, help="timers: workflows sleeping (default 10,000, quick 1,000)"
    )
    parser.add_argument(
        "--timers-spread",
        type=float,
        action="append",
        metavar="SECONDS",
        help="timers: due times spread evenly over this many seconds, one round each "
        "(repeatable; default 60 and 1)",
    )
    parser.add_argument(
        "--timers-lead",
        type=float,
        help="timers: seconds from the first start to the first due time (default: 1.25 x "
        "the time the warm-up says scheduling them takes, plus 20)",
    )
    parser.add_argument(
        "--timers-variant",
        action="append",
        choices=("in-place", "message"),
        help="timers: how a fired timer wakes its workflow, one pass each (repeatable): in "
        "the timer's transaction (default) or through a workflow task's message",
    )
    parser.add_argument(
        "--timers-aged",
        action="store_true",
        help="timers: the rounds again on a clone of the seeded database (--seed-runs/--seed-open)",
    )
    return parser.parse_args(argv)


def source_info() -> dict[str, Any]:
    """The engine code being measured: git commit and whether the tree had changes."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=config.ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [
        line for line in git("status", "--porcelain", "--", "durable_workflow").splitlines() if line
    ]
    commit = git("rev-parse", "HEAD") or os.environ.get("DW_BENCH_SOURCE_COMMIT") or None
    return {
        "commit": commit,
        "engine_files_changed": len(changed) if git("rev-parse", "HEAD") else None,
    }


def machine_info(server_versions: Callable[[], dict[str, str]] | None = None) -> dict[str, Any]:
    """Cores, memory, CPU, Python and library versions, plus ``server_versions()``
    (default: the benchmark's PostgreSQL and Redis)."""
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/meminfo") as handle:
            info["memory_total_mb"] = int(handle.readline().split()[1]) // 1024
        with open("/proc/cpuinfo") as handle:
            models = [
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            ]
            info["cpu"] = models[0] if models else ""
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    for package in (
        "django",
        "celery",
        "kombu",
        "redis",
        "psycopg",
        "greenlet",
        "fastavro",
        "dbos",
    ):
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            info[package] = None
    try:
        info.update((server_versions or services.server_versions)())
    except Exception as exc:
        info["server_versions_error"] = str(exc)
    return info


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # ``aged`` (a seeded database of a million runs) only runs when asked for.
    selected = [
        name for name in ORDER if (name in args.scenario if args.scenario else name not in OPT_IN)
    ]
    ctx = Context(
        quick=args.quick,
        repeat=args.repeat or (3 if args.quick else 5),
        workers=args.workers,
        throughput_n=args.throughput_n or (50 if args.quick else 200),
        memory_n=args.memory_n or (1_000 if args.quick else 10_000),
        seed_runs=args.seed_runs,
        seed_open=args.seed_open,
        keep_db=args.keep_db,
        prune_runs=args.prune_runs,
        prune_batch=args.prune_batch,
        timers_n=args.timers_n or (1_000 if args.quick else 10_000),
        timers_spreads=tuple(args.timers_spread or (60.0, 1.0)),
        timers_lead=args.timers_lead,
        timers_aged=args.timers_aged,
        timers_variants=tuple(args.timers_variant or ("in-place",)),
    )
    os.environ["DW_BENCH_DB_CONNECTIONS"] = config.DB_CONNECTIONS = args.db_connections
    workers.stop_on_signals()
    services.check_services()
    config.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (config.RESULTS_DIR / "logs").mkdir(exist_ok=True)

    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    os.environ["DW_BENCH_ADMIN"] = "1"  # this process times admin pages (workers: no admin)
    services.create_database(config.PG_DB)
    import django

    django.setup()
    services.migrate()

    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "quick": ctx.quick,
            "repeat": ctx.repeat,
            "workers": ctx.workers,
            "pool": "solo",
            "throughput_n": ctx.throughput_n,
            "memory_n": ctx.memory_n,
            "seed": {"runs": ctx.seed_runs, "open": ctx.seed_open}
            if {"aged", "prune"} & set(selected)
            else None,
            "db_connections": config.DB_CONNECTIONS,
            "machine": machine_info(),
            "source": source_info(),
        },
        "scenarios": {},
    }
    interrupted = None
    try:
        for name in selected:
            print(f"\n== {name}", flush=True)
            services.flush_engine_tables()  # at the start: --keep-db keeps the last one's rows
            if name in NEEDS_WORKERS:
                services.flush_redis()
            t0 = time.monotonic()
            try:
                module = importlib.import_module(f"benchmarks.scenarios.{name}")
                outcome = module.run(ctx)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                traceback.print_exc()
                outcome = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "rows": []}
            outcome["seconds"] = round(time.monotonic() - t0, 1)
            # Other processes on the machine skew absolute numbers (ratios less so).
            outcome["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            results["scenarios"][name] = outcome
            print(f"   ({outcome['status']}, {outcome['seconds']} s)", flush=True)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the scenario stopped what it ran
        interrupted = str(exc) or "SIGINT"
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            services.drop_database(config.PG_DB)
        services.flush_redis()
    if interrupted:
        kept = "kept (--keep-db)" if args.keep_db else "dropped"
        print(f"stopped by {interrupted}: workers stopped, databases {kept}", flush=True)
        return 130

    results["meta"]["duration_seconds"] = round(time.monotonic() - started, 1)
    results["targets"] = evaluate_targets(results["scenarios"])
    print_table(results)
    with open(args.output, "w") as handle:
        json.dump(results, handle, indent=2, default=str)
    print(f"\nresults written to {args.output}")
    return 0
