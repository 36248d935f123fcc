"""Scenario ``floor``: what one step writes and sends, for the engine and for DBOS.

Sides: the engine's queued activity step (every workflow and activity task its
own message: ``EAGER_ACTIVITIES`` and ``EAGER_WORKFLOW_TASKS`` off), its eager
step (the default), its local-activity step, and a DBOS step, all on the same
PostgreSQL server. Each side runs one workflow of ``small`` steps and one of
``large`` steps, each in its own window that starts with a ``CHECKPOINT``; the
per-step figure is the difference divided by ``large - small``, so what a run
costs once (start, completion, the first touch of a page after the checkpoint)
drops out. Counters per window (see ``benchmarks/physical.py``):

* WAL records and bytes of the side's database, from ``pg_walinspect``, with
  full-page images, commit records and the bytes of each relation; plus the
  server-wide ``pg_stat_wal`` and LSN deltas, and what other databases wrote
  in the same window (others share the server);
* rows inserted, updated (HOT), deleted and locked, and btree entries inserted,
  counted from the WAL records (exact); the statistics views' counts
  (``pg_stat_user_tables``, index scans from ``pg_stat_user_indexes``) are kept
  too, but backends report them lazily, so a window may miss some;
* Redis commands on the benchmark's database (MONITOR): LPUSH is a message sent;
* bytes on the processes' TCP connections to PostgreSQL and Redis (``ss -tinp``);
* CPU of the worker processes (or DBOS's process) and of their PostgreSQL backends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from benchmarks import config, physical
from benchmarks.scenarios.common import Context, row, unique

QUEUED_ENV = (("DW_BENCH_EAGER_ACTIVITIES", "0"), ("DW_BENCH_EAGER_WORKFLOW_TASKS", "0"))
SETTLE = 1.5  # seconds for backends to report their table statistics once idle
SIDES = ("queued", "eager", "local", "dbos")


def _settle(conn: Any, database: str) -> None:
    """Wait until the database's row counters stop moving (backends report them
    within a second or so of going idle)."""
    time.sleep(SETTLE)
    last = None
    for _ in range(20):
        now = physical.database_stats(conn, database)
        now.pop("xact_commit")  # DBOS polls its queues: commits never stop moving
        if now == last:
            return
        last = now
        time.sleep(0.5)


def measure(action: Callable[[], int], *, database: str, pids: list[int]) -> dict[str, Any]:
    """Run ``action`` (returns the read-only polls it made in ``database``) inside one
    window of counters."""
    with physical.admin() as adm, physical.wal_kept(adm):
        _settle(adm, database)
        adm.execute("CHECKPOINT")
        oid = next(iter(physical.database_oids(adm, [database])))
        tables0 = physical.table_stats(database)
        db0 = physical.database_stats(adm, database)
        server0 = {**physical.server_wal_stats(adm), "checkpoints": physical.checkpoints(adm)}
        backends = physical.backend_pids(adm, database)
        cpu0 = physical.cpu_of(pids + backends)
        sockets0 = physical.socket_bytes(pids)
        load0 = os.getloadavg()
        lsn0 = physical.current_lsn(adm)
        with physical.RedisCommands() as redis_commands:
            t0 = time.perf_counter()
            polls = action()
            wall = time.perf_counter() - t0
            lsn1 = physical.current_lsn(adm)
            sockets1 = physical.socket_bytes(pids)
            backends = sorted(set(backends) | set(physical.backend_pids(adm, database)))
            cpu1 = physical.cpu_of(pids + backends)
        server1 = {**physical.server_wal_stats(adm), "checkpoints": physical.checkpoints(adm)}
        _settle(adm, database)
        db1 = physical.database_stats(adm, database)
        tables1 = physical.table_stats(database)
        wal = physical.wal_between(lsn0, lsn1, oid)
        lsn_bytes = int(adm.execute("SELECT pg_wal_lsn_diff(%s, %s)", [lsn1, lsn0]).fetchone()[0])
    return {
        "wall_s": round(wall, 3),
        "load_average": {"before": round(load0[0], 2), "after": round(os.getloadavg()[0], 2)},
        "wal": wal,
        # Server-wide (every database): clean only when ``wal.elsewhere`` is small.
        "server_lsn_bytes": lsn_bytes,
        "server_pg_stat_wal": {k: server1[k] - server0[k] for k in server0},
        "database": {
            **{k: db1[k] - db0[k] for k in db0},
            "harness_read_transactions": polls,
        },
        "tables": physical.diff_tables(tables0, tables1),
        "redis_commands": dict(redis_commands.counts),
        "redis_command_bytes": redis_commands.bytes,
        "wire": physical.wire_delta(sockets0, sockets1),
        "cpu_s": {
            "processes": round(sum(cpu1.get(p, 0) - cpu0.get(p, 0) for p in pids), 3),
            "postgresql": round(sum(cpu1.get(p, 0) - cpu0.get(p, 0) for p in backends), 3),
        },
    }


def _engine_action(workflow: type, steps: int) -> Callable[[], int]:
    def action() -> int:
        from durable_workflow import WorkflowStub
        from durable_workflow.models import TERMINAL_RUN_STATUSES, WorkflowRun

        instance_id = unique("floor")
        WorkflowStub.make(workflow, instance_id).start(steps)
        deadline, polls = time.monotonic() + 120, 0
        while True:
            polls += 1
            status = (
                WorkflowRun.objects.filter(instance_id=instance_id)
                .values_list("status", flat=True)
                .first()
            )
            if status in TERMINAL_RUN_STATUSES:
                if status != "completed":
                    raise RuntimeError(f"floor workflow ended {status}")
                return polls
            if time.monotonic() > deadline:
                raise TimeoutError(f"floor workflow of {steps} steps not done in 120 s")
            time.sleep(0.05)

    return action


def _per_step(small: dict[str, Any], large: dict[str, Any], steps: int) -> dict[str, Any]:
    def d(get: Callable[[dict[str, Any]], float]) -> float:
        return round((get(large) - get(small)) / steps, 2)

    def table_sum(window: dict[str, Any], key: str) -> int:
        return sum(t.get(key, 0) for t in window["tables"].values())

    def by_type(window: dict[str, Any], prefix: str) -> int:
        return sum(n for k, n in window["wal"].get("by_type", {}).items() if k.startswith(prefix))

    def wire(window: dict[str, Any], service: str, key: str) -> int:
        return window["wire"].get(service, {}).get(key, 0)

    relations = sorted(
        set(small["wal"]["relations"]) | set(large["wal"]["relations"]),
    )
    return {
        "wal_bytes": d(lambda w: w["wal"]["bytes"]),
        "wal_fpi_bytes": d(lambda w: w["wal"].get("fpi_bytes", 0)),
        "wal_records": d(lambda w: w["wal"]["records"]),
        "durable_commits": d(lambda w: w["wal"]["commits"]),
        "heap_inserts": d(lambda w: by_type(w, "Heap/INSERT")),
        "heap_updates": d(lambda w: by_type(w, "Heap/UPDATE")),
        "heap_hot_updates": d(lambda w: by_type(w, "Heap/HOT_UPDATE")),
        "heap_deletes": d(lambda w: by_type(w, "Heap/DELETE")),
        "heap_row_locks": d(lambda w: by_type(w, "Heap/LOCK")),
        "btree_entries_inserted": d(lambda w: by_type(w, "Btree/INSERT")),
        "rows_inserted": d(lambda w: table_sum(w, "inserted")),
        "rows_updated": d(lambda w: table_sum(w, "updated")),
        "rows_hot_updated": d(lambda w: table_sum(w, "hot_updated")),
        "rows_deleted": d(lambda w: table_sum(w, "deleted")),
        "index_scans": d(lambda w: table_sum(w, "index_scans")),
        "transactions": d(
            lambda w: w["database"]["xact_commit"] - w["database"]["harness_read_transactions"]
        ),
        "broker_messages": d(lambda w: w["redis_commands"].get("LPUSH", 0)),
        "broker_commands": d(lambda w: sum(w["redis_commands"].values())),
        "pg_bytes_sent": d(lambda w: wire(w, "postgresql", "sent")),
        "pg_bytes_received": d(lambda w: wire(w, "postgresql", "received")),
        "redis_bytes_sent": d(lambda w: wire(w, "redis", "sent")),
        "redis_bytes_received": d(lambda w: wire(w, "redis", "received")),
        "cpu_ms_process": d(lambda w: w["cpu_s"]["processes"] * 1000),
        "cpu_ms_postgresql": d(lambda w: w["cpu_s"]["postgresql"] * 1000),
        "wal_bytes_by_relation": {
            node: d(lambda w, n=node: w["wal"]["relations"].get(n, {}).get("bytes", 0))
            for node in relations
        },
    }


def _side(
    name: str, run_steps: Callable[[int], dict[str, Any]], sizes: tuple[int, int], ctx: Context
) -> dict[str, Any]:
    small, large = run_steps(sizes[0]), run_steps(sizes[1])
    per_step = _per_step(small, large, sizes[1] - sizes[0])
    ctx.log(
        f"{name}: {per_step['wal_bytes']:.0f} WAL bytes, {per_step['durable_commits']} commits, "
        f"{per_step['broker_messages']} messages per step (load {large['load_average']})"
    )
    for window in (small, large):
        window["wal"]["by_type"] = dict(window["wal"].get("by_type", {}))
        window["wal"]["relations"] = {
            str(k): {"bytes": v["bytes"], "by_type": dict(v["by_type"])}
            for k, v in window["wal"]["relations"].items()
        }
    return {"per_step": per_step, "windows": {str(sizes[0]): small, str(sizes[1]): large}}


def _name_relations(result: dict[str, Any], database: str) -> None:
    known = physical.relation_names(database)
    by_rel = result["per_step"]["wal_bytes_by_relation"]
    result["per_step"]["wal_bytes_by_relation"] = dict(
        sorted(
            ((known.get(int(node), str(node)), v) for node, v in by_rel.items() if v > 0),
            key=lambda item: -item[1],
        )
    )


def run(ctx: Context) -> dict[str, Any]:
    from benchmarks.dbos_client import DbosBaseline
    from benchmarks.workers import running_workers
    from benchmarks.workflows import LocalSteps, Sequence

    sizes = (10, 110) if ctx.quick else (10, 210)
    physical.ensure_walinspect(config.PG_DB)
    sides: dict[str, Any] = {}
    with DbosBaseline() as dbos:
        dbos.steps(5)  # warm-up
        assert dbos.process is not None
        pid = dbos.process.pid

        def dbos_window(steps: int) -> dict[str, Any]:
            return measure(lambda: dbos.steps(steps) and 0, database=config.DBOS_DB, pids=[pid])

        sides["dbos"] = _side("dbos step", dbos_window, sizes, ctx)
        _name_relations(sides["dbos"], config.DBOS_DB)  # before DBOS's database is dropped
    for label, env, workflow in (
        ("queued", QUEUED_ENV, Sequence),
        ("eager", (), Sequence),
        ("local", (), LocalSteps),
    ):
        with running_workers(ctx.workers, env=env) as workers:
            pids = [w.pid for w in workers]
            _engine_action(workflow, 3)()  # warm-up

            def engine_window(steps: int, wf: type = workflow, p: list[int] = pids) -> Any:
                return measure(_engine_action(wf, steps), database=config.PG_DB, pids=p)

            sides[label] = _side(f"engine {label} step", engine_window, sizes, ctx)
            _name_relations(sides[label], config.PG_DB)

    dbos_wal = sides["dbos"]["per_step"]["wal_bytes"]
    rows = []
    for metric, key, unit in (
        ("WAL bytes per step", "wal_bytes", "B"),
        ("WAL records per step", "wal_records", ""),
        ("durable commits per step", "durable_commits", ""),
        ("rows inserted per step", "heap_inserts", ""),
        ("rows updated (HOT) / locked per step", "rows_updated", ""),
        ("btree entries inserted per step", "btree_entries_inserted", ""),
        ("broker messages per step", "broker_messages", ""),
        ("bytes to+from PostgreSQL per step", "pg_bytes", "B"),
        ("CPU per step: worker / PostgreSQL", "cpu", "ms"),
    ):
        for side in ("queued", "eager", "local"):
            engine, dbos_value = _pair(sides, side, key)
            rows.append(
                row(
                    f"{metric} ({side})",
                    engine,
                    dbos_value,
                    physical_ratio(engine, dbos_value),
                    unit,
                    "dbos step",
                )
            )
    return {
        "status": "ok",
        "sizes": list(sizes),
        "sides": sides,
        "wal_le_dbos": {
            side: sides[side]["per_step"]["wal_bytes"] <= dbos_wal for side in SIDES[:3]
        },
        "rows": rows,
    }


def _pair(sides: dict[str, Any], side: str, key: str) -> tuple[Any, Any]:
    def value(per_step: dict[str, Any]) -> Any:
        if key == "pg_bytes":
            return round(per_step["pg_bytes_sent"] + per_step["pg_bytes_received"])
        if key == "rows_updated":
            updated = per_step["heap_updates"] + per_step["heap_hot_updates"]
            return f"{updated:.2f} ({per_step['heap_hot_updates']}) / {per_step['heap_row_locks']}"
        if key == "cpu":
            return f"{per_step['cpu_ms_process']} / {per_step['cpu_ms_postgresql']}"
        return per_step[key]

    return value(sides[side]["per_step"]), value(sides["dbos"]["per_step"])


def physical_ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return round(a / b, 2)
    return None
