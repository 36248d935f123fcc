"""Scenario ``aged``: the same figures on an empty database and on one that has lived.

The seeded database (``benchmarks/seed.py``: by default 1,000,000 closed runs
over a year and 100,000 open runs waiting on timers and signals) is built once
into a template and cloned into ``dw_bench_aged``; ``migrate`` then brings the
clone up to the engine's migrations (timed: what an upgrade costs a database of
that size). The empty side is the harness's own ``dw_bench``.

Step figures: blocks of sequential workflows (the ``sequential`` scenario's
engine side) and one-activity throughput rounds, alternating empty, aged,
empty, aged, each block on fresh workers connected to that database. Operator
figures (``benchmarks/aged_ops.py``): repair pass, admin pages, doctor and
``list_runs``, each with the plan of its slowest statement.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks import aged_ops, stats
from benchmarks.scenarios.common import Context, row, unique
from benchmarks.scenarios.sequential import engine_once as sequence_once
from benchmarks.workers import check_alive, running_workers

AGED_DB = "dw_bench_aged"
BLOCKS = 2  # empty, aged, empty, aged
THROUGHPUT_N = 100


@contextlib.contextmanager
def using_database(name: str) -> Iterator[None]:
    """Point this process (and the workers it starts) at database ``name``."""
    from django.conf import settings
    from django.db import connections

    previous = settings.DATABASES["default"]["NAME"]

    def point(to: str) -> None:
        connections.close_all()
        settings.DATABASES["default"]["NAME"] = to
        connections["default"].settings_dict["NAME"] = to
        os.environ["DW_BENCH_PG_DB"] = to

    point(name)
    try:
        yield
    finally:
        point(previous)


def throughput_once(n: int, timeout: float) -> float:
    """``n`` one-activity workflows started in one transaction; completed per second.

    Waits by instance id (the unique index), not by prefix: a ``LIKE`` over a
    million runs would load the database it measures.
    """
    from django.db import transaction
    from django.db.models import Max

    from benchmarks.scenarios.common import wait_completed
    from benchmarks.workflows import OneStep
    from durable_workflow import WorkflowStub
    from durable_workflow.models import WorkflowRun

    ids = [f"{unique('tp')}-{index}" for index in range(n)]
    with transaction.atomic():
        for instance_id in ids:
            WorkflowStub.make(OneStep, instance_id).start()
        t0 = time.time()
    wait_completed(ids, timeout=timeout, interval=0.1)
    last = WorkflowRun.objects.filter(namespace="default", instance_id__in=ids).aggregate(
        m=Max("closed_at")
    )["m"]
    return n / (last.timestamp() - t0)


def _step_block(ctx: Context, samples: dict[str, list[float]], side: str) -> None:
    with running_workers(ctx.workers) as workers:
        sequence_once(60)  # warm-up
        for _ in range(ctx.repeat):
            check_alive(workers)
            steps, _total = sequence_once(60)
            samples[f"{side}_step"] += steps
            samples[f"{side}_throughput"].append(throughput_once(THROUGHPUT_N, 120))
        ctx.log(
            f"{side}: step p50 {stats.median(samples[f'{side}_step']) * 1000:.2f} ms, "
            f"throughput {stats.median(samples[f'{side}_throughput']):.1f}/s "
            f"(load {os.getloadavg()[0]:.1f})"
        )


def clone_of_the_seed(
    ctx: Context, db: str, *, before_migrate: Callable[[], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The seed's template (built if missing) cloned into ``db`` and migrated; what it
    took. ``before_migrate`` runs on the clone first, its answer kept with the rest.
    Should it fail or be interrupted, the clone is dropped here (unless ``--keep-db``):
    the scenario's own clean-up only covers what comes after."""
    from django.core.management import call_command

    from benchmarks import seed, services

    t0 = time.monotonic()
    template = seed.ensure_template(ctx.seed_runs, ctx.seed_open, log=ctx.log)
    built = time.monotonic() - t0
    try:
        cloned = seed.clone_into(template, db)
        extra: dict[str, Any] = {}
        with using_database(db):
            if before_migrate is not None:
                extra = before_migrate()
            t1 = time.monotonic()
            call_command("migrate", interactive=False, verbosity=0)
            migrated = time.monotonic() - t1
    except BaseException:
        if not ctx.keep_db:
            services.drop_database(db)
        raise
    ctx.log(
        f"{template}: built/found {built:.0f} s, cloned {cloned:.0f} s, migrated {migrated:.0f} s"
    )
    return {
        "template": template,
        "build_or_find_seconds": round(built, 1),
        "clone_seconds": round(cloned, 1),
        "migrate_seconds": round(migrated, 1),
        **extra,
    }


def _prepare_aged(ctx: Context) -> dict[str, Any]:
    def before_migrate() -> dict[str, Any]:
        from django.core.management import call_command

        # The clone is at the migrations of its build: the operator figures on it as it
        # is give the plans before the indexes that came after the build.
        for app in ("sessions", "admin"):  # the admin's own tables (the build has none)
            call_command("migrate", app, interactive=False, verbosity=0)
        ctx.log("operator figures, aged database before migrate")
        return {"operations_before_migrate": aged_ops.measure(ctx.log)}

    return clone_of_the_seed(ctx, AGED_DB, before_migrate=before_migrate)


def run(ctx: Context) -> dict[str, Any]:
    from django.db import connection

    prepared = _prepare_aged(ctx)
    empty_db = connection.settings_dict["NAME"]
    samples: dict[str, list[float]] = {
        f"{side}_{kind}": [] for side in ("empty", "aged") for kind in ("step", "throughput")
    }
    ops: dict[str, Any] = {}
    try:
        for _ in range(BLOCKS):
            for side, name in (("empty", empty_db), ("aged", AGED_DB)):
                with using_database(name):
                    _step_block(ctx, samples, side)
        for side, name in (("empty", empty_db), ("aged", AGED_DB)):
            with using_database(name):
                ctx.log(f"operator figures, {side} database")
                ops[side] = aged_ops.measure(ctx.log)
    finally:
        if not ctx.keep_db:
            from benchmarks import services

            services.drop_database(AGED_DB)
    return _report(prepared, samples, ops, ctx)


def _report(
    prepared: dict[str, Any], samples: dict[str, list[float]], ops: dict[str, Any], ctx: Context
) -> dict[str, Any]:
    step = {side: stats.summary(samples[f"{side}_step"], scale=1000) for side in ("empty", "aged")}
    tput = {side: stats.summary(samples[f"{side}_throughput"]) for side in ("empty", "aged")}
    rows = [
        row(
            "step latency p50",
            step["aged"]["median"],
            step["empty"]["median"],
            stats.ratio(step["aged"]["median"], step["empty"]["median"]),
            "ms",
            "empty database",
        ),
        row(
            "step latency p95",
            step["aged"]["p95"],
            step["empty"]["p95"],
            stats.ratio(step["aged"]["p95"], step["empty"]["p95"]),
            "ms",
            "empty database",
        ),
        row(
            f"throughput, {THROUGHPUT_N} one-step workflows",
            tput["aged"]["median"],
            tput["empty"]["median"],
            stats.ratio(tput["aged"]["median"], tput["empty"]["median"]),
            "/s",
            "empty database",
        ),
    ]
    for name, target in aged_ops.TARGETS_MS.items():
        aged, empty = ops.get("aged", {}).get(name), ops.get("empty", {}).get(name)
        if aged is None:
            continue
        rows.append(
            row(
                f"{name} (target {target:,} ms)",
                aged["ms"]["median"],
                empty["ms"]["median"] if empty else None,
                None,
                "ms",
                "empty database",
            )
        )
    return {
        "status": "ok",
        "seed": {"runs": ctx.seed_runs, "open": ctx.seed_open, **prepared},
        "step_latency_ms": step,
        "throughput_per_second": tput,
        "operations": ops,
        "targets_ms": aged_ops.TARGETS_MS,
        "rows": rows,
    }
