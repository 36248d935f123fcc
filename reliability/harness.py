"""Orchestration: private services, the scenarios in order, the table and the JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import pathlib
import shutil
import signal
import tempfile
import time
import traceback
from typing import Any

from reliability import audit, config, services
from reliability.lab import Context, execute
from reliability.report import print_table
from reliability.scenarios import ORDER, load


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="reliability/chaos.sh",
        description="Faults injected into real workers, PostgreSQL and Redis; invariants checked.",
    )
    parser.add_argument("--quick", action="store_true", help="short scenarios, no soak (<10 min)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=ORDER,
        metavar="NAME",
        help=f"run only these (repeatable): {', '.join(ORDER)}",
    )
    parser.add_argument("--seed", type=int, default=28, help="random seed of the faults")
    parser.add_argument(
        "--skew", type=float, default=10.0, help="clock scenario: seconds ahead/behind (10)"
    )
    parser.add_argument(
        "--drain-limit",
        type=float,
        help="runs still open this many seconds after the faults are stuck (quick 90, full 420)",
    )
    parser.add_argument(
        "--soak-workflows", type=int, default=10_000, help="soak: workflows (10,000)"
    )
    parser.add_argument("--soak-minutes", type=float, default=15.0, help="soak: minutes (15)")
    parser.add_argument("--output", help="JSON result path (default results/<mode>-latest.json)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run directory (cluster, logs)"
    )
    return parser.parse_args(argv)


def _log_to_file(path: pathlib.Path) -> None:
    """The harness's own log lines (the engine's client side: a start or signal that met
    a fault) go to a file, not between the table's lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(formatter)
    root.handlers = [handler]


def _on_sigterm(*_: Any) -> None:
    raise SystemExit("reliability: stopped by SIGTERM")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness import machine_info, source_info

    args = parse_args(argv)
    names = [n for n in ORDER if (n in args.scenario if args.scenario else True)]
    scenarios = [load(n) for n in names]
    if args.quick and not args.scenario:
        scenarios = [s for s in scenarios if s.in_quick]
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="dw-chaos-"))
    os.environ[config.RUN_DIR_ENV] = str(run_dir)
    if args.keep:
        (run_dir / "keep").touch()
    os.environ["DJANGO_SETTINGS_MODULE"] = "reliability.settings"
    signal.signal(signal.SIGTERM, _on_sigterm)
    ctx = Context(
        quick=args.quick,
        seed=args.seed,
        drain_limit=args.drain_limit or (90.0 if args.quick else 420.0),
        quiet_seconds=10.0 if args.quick else 20.0,
        skew_seconds=args.skew,
        run_dir=run_dir,
        results_dir=config.RESULTS_DIR,
        soak_workflows=args.soak_workflows,
        soak_seconds=args.soak_minutes * 60,
    )
    config.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    postgres, redis = services.Postgres(run_dir), services.Redis(run_dir)
    results: dict[str, Any] = {"meta": {}, "scenarios": {}}
    started = time.monotonic()
    try:
        print(f"== services (run directory {run_dir})", flush=True)
        postgres.init()
        postgres.start()
        redis.start()
        services.create_database()
        import django
        from django.core.management import call_command

        django.setup()
        _log_to_file(config.RESULTS_DIR / "logs" / "harness.log")
        call_command("migrate", interactive=False, verbosity=0)
        with services.admin() as conn:
            audit.install(conn)
        results["meta"] = {
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "quick": ctx.quick,
            "seed": ctx.seed,
            "skew_seconds": ctx.skew_seconds,
            "drain_limit_seconds": ctx.drain_limit,
            "soak": {"workflows": ctx.soak_workflows, "seconds": ctx.soak_seconds},
            "machine": machine_info(
                lambda: {"postgresql_server": postgres.version(), "redis_server": redis.version()}
            ),
            "source": source_info(),
        }
        for scenario in scenarios:
            print(f"\n== {scenario.name}: {scenario.title}", flush=True)
            t0 = time.monotonic()
            try:
                outcome = execute(ctx, scenario, postgres, redis)
            except Exception as exc:
                traceback.print_exc()
                outcome = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
            outcome["title"] = scenario.title
            outcome["seconds"] = round(time.monotonic() - t0, 1)
            outcome["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            results["scenarios"][scenario.name] = outcome
            print(f"   ({outcome['status']}, {outcome['seconds']} s)", flush=True)
    finally:
        from django.db import connections

        connections.close_all()
        redis.stop()
        postgres.stop()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    results["meta"]["duration_seconds"] = round(time.monotonic() - started, 1)
    results["meta"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print_table(results)
    output = pathlib.Path(
        args.output or config.RESULTS_DIR / f"{'quick' if ctx.quick else 'full'}-latest.json"
    )
    output.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults written to {output}")
    failed = [n for n, f in results["scenarios"].items() if f["status"] in ("FAIL", "error")]
    return 1 if failed else 0
