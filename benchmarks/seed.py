#!/usr/bin/env python
"""A database that has lived: closed runs over a year and open runs waiting, built once.

``python benchmarks/seed.py --runs 1000000 --open 100000`` prints the name of a
template database ``dw_seed_<hash>`` holding that many runs, building it first
when it does not exist yet (the hash covers the migrations, this module, the
seed workflows and the sizes, so a change rebuilds). ``clone_into()`` copies it
into the benchmark's database with ``CREATE DATABASE ... TEMPLATE`` (a file copy).

How it is built, in one process on that template database:

1. ``migrate`` (so ``django_migrations`` says what the engine expects);
2. real runs of ``benchmarks.seed_workflows.Order``, driven in this process
   through the executor with the inline backend: completed (with and without
   an approval signal), failed, cancelled, terminated, expired by its timer,
   and two open shapes (waiting on a signal with a timer of days; on a signal
   alone). Their rows in every engine table are set aside as templates;
3. a map of N copies (instance id, namespace, workflow type, age, search
   attribute values), then one ``INSERT ... SELECT`` per table and batch that
   copies the template rows of each copy's variant, every uuid re-derived per
   copy (time-ordered like the engine's uuid7) so references stay
   consistent, every timestamp moved by the copy's age;
4. secondary indexes and unique constraints dropped before the load and built
   after it, foreign-key triggers off during the load (``session_replication_role``);
5. ``VACUUM (ANALYZE)`` (hint bits and the visibility map, once for every
   clone), then the database is renamed to its final name (a half-built
   template never has that name).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import config  # noqa: E402

#: Closed variants and how many of each 100 copies take them.
CLOSED_MIX = {
    "approved": 55,
    "plain": 20,
    "failed": 10,
    "cancelled": 5,
    "terminated": 5,
    "expired": 5,
}
#: Open variants: waiting on a signal with a timer of 3 days, or on a signal alone.
OPEN_MIX = {"open_timer": 70, "open_signal": 30}
CLOSED_TYPES = [
    "seed.order",
    "seed.order",
    "seed.order",
    "billing.invoice",
    "billing.refund",
    "shipping.label",
    "shipping.return",
    "crm.onboarding",
    "crm.survey",
    "reports.nightly",
]
#: Namespaces by share of 20 copies.
NAMESPACES = [("default", 12), ("billing", 4), ("shipping", 3), ("crm", 1)]
REGIONS = ["eu-west", "eu-central", "us-east", "us-west", "ap-south"]
CUSTOMERS = 50_000
APPROVAL_DAYS = 3
BATCH = 100_000
OWNER = {
    "durable_workflow_run": "t.id",
    "durable_workflow_instance": "t.current_run_id",
    "durable_workflow_child_call": "t.parent_run_id",
    "durable_workflow_activity_attempt": "t.seed_owner",
}


#: Bump when the build below changes what it writes (the name changes, so it rebuilds).
SEED_VERSION = 1


def template_name(runs: int, open_runs: int) -> str:
    """``dw_seed_<hash>`` of the sizes, ``SEED_VERSION`` and the seed workflows' source.

    Migrations are left out on purpose: a clone is migrated like a database that has
    lived (``migrate`` applies what came after the build, and that time is measured
    too), so a new migration does not cost a rebuild. ``--rebuild`` forces one.
    """
    digest = hashlib.sha256(f"{SEED_VERSION}:{runs}:{open_runs}".encode())
    digest.update((ROOT / "benchmarks" / "seed_workflows.py").read_bytes())
    return f"dw_seed_{digest.hexdigest()[:12]}"


def _admin():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(config.pg_url("postgres"), autocommit=True, connect_timeout=5)


def exists(name: str) -> bool:
    with _admin() as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            is not None
        )


def ensure_template(runs: int, open_runs: int, *, log: Any = print) -> str:
    """The template's name, built first (in a subprocess) when missing."""
    import subprocess

    name = template_name(runs, open_runs)
    if exists(name):
        return name
    log(f"building the seed {name} ({runs:,} closed runs, {open_runs:,} open); minutes")
    try:
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "seed.py"),
                "--runs",
                str(runs),
                "--open",
                str(open_runs),
            ],
            check=True,
        )
    except BaseException:  # interrupted or failed: a half-built seed is no use to anyone
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}_building" WITH (FORCE)')
        raise
    return name


def clone_into(template: str, target: str) -> float:
    """Drop ``target`` and copy ``template`` into it; the open runs' timers are moved by
    the time since the build, so they stay due over the coming days. Returns seconds."""
    import psycopg

    t0 = time.monotonic()
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    with psycopg.connect(config.pg_url(target), autocommit=True) as conn:
        conn.execute(
            """
            WITH drift AS (SELECT now() - built_at AS d FROM dw_seed_info)
            UPDATE durable_workflow_timer SET fire_at = fire_at + (SELECT d FROM drift),
                   created_at = created_at + (SELECT d FROM drift)
            WHERE status = 'pending'
            """
        )
        conn.execute(
            """
            WITH drift AS (SELECT now() - built_at AS d FROM dw_seed_info)
            UPDATE durable_workflow_task SET available_at = available_at + (SELECT d FROM drift)
            WHERE status = 'ready' AND task_type = 'timer'
            """
        )
        conn.execute("UPDATE dw_seed_info SET built_at = now()")
    return time.monotonic() - t0


# --------------------------------------------------------------------------- build


def _samples() -> dict[str, str]:
    """Drive one real run of each variant; returns variant -> run id."""
    import datetime as dt

    from benchmarks.seed_workflows import Order, order_arguments
    from durable_workflow import StartOptions, WorkflowStub, clock
    from durable_workflow.executor import dispatch
    from durable_workflow.models import WorkflowRun
    from durable_workflow.testing.inline import InlineBackend, run_ready_tasks

    dispatch.set_backend(InlineBackend())
    plans: dict[str, tuple[float, bool, str | None]] = {
        "approved": (APPROVAL_DAYS, False, "signal"),
        "plain": (0, False, None),
        "failed": (0, True, None),
        "cancelled": (APPROVAL_DAYS, False, "cancel"),
        "terminated": (APPROVAL_DAYS, False, "terminate"),
        "expired": (APPROVAL_DAYS, False, "expire"),
        "open_timer": (APPROVAL_DAYS, False, None),
        "open_signal": (-1, False, None),
    }
    out = {}
    for variant, (days, decline, then) in plans.items():
        instance_id = f"tmpl-{variant}"
        options = StartOptions(
            search_attributes={
                "CustomerId": "cust-000000",
                "Region": "eu-west",
                "Amount": 129.9,
                "Express": False,
            },
            business_key=f"order-{variant}",
        )
        stub = WorkflowStub.make(Order, instance_id)
        stub.start(order_arguments(f"order-{variant}"), days, decline, options=options)
        run_ready_tasks()
        if then == "signal":
            stub.signal("approve", {"approved_by": "ops@example.com", "note": "looks fine"})
        elif then == "cancel":
            stub.cancel("customer asked to cancel")
        elif then == "terminate":
            stub.terminate("duplicate order, closed by an operator")
        elif then == "expire":
            clock.advance(dt.timedelta(days=days, minutes=1))
        run_ready_tasks()
        clock.reset()
        run = WorkflowRun.objects.get(instance_id=instance_id)
        out[variant] = str(run.id)
    return out


def _columns(cur: Any, table: str) -> list[tuple[str, str]]:
    cur.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_name = %s ORDER BY ordinal_position",
        [table],
    )
    return list(cur.fetchall())


def _expression(table: str, column: str, kind: str) -> str | None:
    """What a copy puts in ``column``: None to let the column default (bigserial ids)."""
    if column == "id" and kind == "bigint":
        return None
    special = {
        "namespace": "m.namespace",
        "instance_id": "m.instance_id",
        "business_key": "m.business_key",
        "run_id": "m.run_id",
    }
    if column in special:
        return special[column]
    if table == "durable_workflow_instance" and column == "key":
        return "m.instance_key"
    if table in ("durable_workflow_run", "durable_workflow_instance"):
        if column == "workflow_type":
            return "m.workflow_type"
        if column == "search_attributes":
            return (
                "jsonb_build_object('CustomerId', m.customer, 'Region', m.region,"
                " 'Amount', m.amount, 'Express', m.express)"
            )
    if table == "durable_workflow_search_attribute":
        by_key = {
            "value_string": "CASE t.key WHEN 'CustomerId' THEN m.customer"
            " WHEN 'Region' THEN m.region ELSE t.value_string END",
            "value_number": "CASE t.key WHEN 'Amount' THEN m.amount ELSE t.value_number END",
            "value_bool": "CASE t.key WHEN 'Express' THEN m.express ELSE t.value_bool END",
        }
        if column in by_key:
            return by_key[column]
    if kind == "uuid":
        # Time-ordered like the engine's uuid7 (the copy's creation time, then a hash of
        # the template id and the copy number), inlined: a function call per value
        # costs more than the rest of the row.
        return f"(m.x || '7' || substr(md5(t.{column}::text || m.gs), 1, 19))::uuid"
    if kind == "timestamp with time zone":
        return f"t.{column} + m.shift"
    return f"t.{column}"


def _build_map(cur: Any, variants: dict[str, str], runs: int, open_runs: int) -> None:
    def case(mix: dict[str, int], modulo_expr: str) -> str:
        arms, low = [], 0
        for variant, share in mix.items():
            low += share
            arms.append(f"WHEN {modulo_expr} < {low} THEN '{variants[variant]}'::uuid")
        return "CASE " + " ".join(arms) + " END"

    namespaces, low = [], 0
    for name, share in NAMESPACES:
        low += share
        namespaces.append(f"WHEN g % 20 < {low} THEN '{name}'")
    types = "(ARRAY[" + ",".join(f"'{t}'" for t in CLOSED_TYPES) + "])"
    regions = "(ARRAY[" + ",".join(f"'{r}'" for r in REGIONS) + "])"
    cur.execute(
        f"""
        CREATE TABLE seed_map AS
        SELECT g, tmpl, namespace, instance_id,
               CASE namespace WHEN 'default' THEN instance_id
                    ELSE namespace || '/' || instance_id END AS instance_key,
               workflow_type, 'order-' || lpad(g::text, 8, '0') AS business_key,
               'cust-' || lpad(
                   (((hashint4(g::int) % {CUSTOMERS}) + {CUSTOMERS}) % {CUSTOMERS})::text, 6, '0'
               ) AS customer,
               {regions}[1 + g % {len(REGIONS)}] AS region,
               round(((g::bigint * 7919) % 100000) / 100.0, 2)::float8 AS amount,
               g % 7 = 0 AS express,
               at, at - built AS shift, x, gs,
               (x || '7' || substr(md5(tmpl::text || gs), 1, 19))::uuid AS run_id
        FROM (
            SELECT *, lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') AS x,
                   ':' || g AS gs
            FROM (
            SELECT c.g, c.tmpl, c.namespace, c.instance_id, c.workflow_type, c.at,
                   r.created_at AS built
            FROM (
                SELECT g,
                       CASE WHEN g <= {runs} THEN {case(CLOSED_MIX, "g % 100")}
                            ELSE {case(OPEN_MIX, "g % 100")} END AS tmpl,
                       CASE {" ".join(namespaces)} END AS namespace,
                       CASE WHEN g <= {runs} THEN 'order-' ELSE 'open-' END
                         || lpad(g::text, 8, '0') AS instance_id,
                       CASE WHEN g <= {runs} THEN {types}[1 + (g / 7) % {len(CLOSED_TYPES)}]
                            ELSE 'seed.order' END AS workflow_type,
                       -- closed: created over the past year, oldest first; open: created
                       -- in the last 3 days minus an hour (their timers fall due over the
                       -- coming hours and days)
                       CASE WHEN g <= {runs}
                            THEN now() - interval '366 days'
                                 + (interval '365 days') * (g::float8 / {max(runs, 1)})
                            ELSE now() - interval '{APPROVAL_DAYS} days' + interval '1 hour'
                                 + (interval '{APPROVAL_DAYS} days' - interval '1 hour')
                                   * ((g - {runs})::float8 / {max(open_runs, 1)})
                       END AS at
                FROM generate_series(1, {runs + open_runs}) AS g
            ) c
            JOIN seed_tmpl_durable_workflow_run r ON r.id = c.tmpl
            ) t
        ) s
        ORDER BY g
        """
    )
    cur.execute("CREATE INDEX ON seed_map (g)")
    cur.execute("ANALYZE seed_map")


def _drop_secondary(cur: Any, tables: list[str]) -> list[str]:
    """Drop unique constraints and secondary indexes; returns the statements that restore them."""
    restore = []
    cur.execute(
        """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
        FROM pg_constraint c WHERE c.contype = 'u' AND c.conrelid::regclass::text = ANY(%s)
        """,
        [tables],
    )
    for table, name, definition in cur.fetchall():
        cur.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        restore.append(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    cur.execute(
        """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index i WHERE NOT i.indisprimary AND i.indrelid::regclass::text = ANY(%s)
        """,
        [tables],
    )
    for name, definition in cur.fetchall():
        cur.execute(f"DROP INDEX {name}")
        restore.append(definition)
    return restore


def build(runs: int, open_runs: int) -> None:
    import psycopg

    final = template_name(runs, open_runs)
    building = final + "_building"
    os.environ["DW_BENCH_PG_DB"] = config.PG_DB = building
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{building}"')
    t0 = time.monotonic()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", interactive=False, verbosity=0)
    variants = _samples()
    connections.close_all()
    print(f"  samples and migrate: {time.monotonic() - t0:.1f} s", flush=True)

    with psycopg.connect(config.pg_url(building), autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute("SET maintenance_work_mem = '1GB'")
        cur.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'durable_workflow_%'")
        tables = [
            name
            for (name,) in cur.fetchall()
            if cur.execute(f"SELECT EXISTS (SELECT FROM {name})").fetchone() == (True,)
        ]
        tables.sort()
        for table in tables:
            cur.execute(f"CREATE TABLE seed_tmpl_{table} AS SELECT * FROM {table}")
        # An attempt's run is its execution's (a join key, so each batch is a hash join).
        cur.execute(
            "ALTER TABLE seed_tmpl_durable_workflow_activity_attempt ADD seed_owner uuid;"
            " UPDATE seed_tmpl_durable_workflow_activity_attempt a SET seed_owner = e.run_id"
            " FROM durable_workflow_activity_execution e WHERE e.id = a.execution_id"
        )
        cur.execute("TRUNCATE " + ", ".join(tables) + " CASCADE")
        _build_map(cur, variants, runs, open_runs)
        restore = _drop_secondary(cur, tables)
        print(f"  map of {runs + open_runs:,} copies: {time.monotonic() - t0:.1f} s", flush=True)
        cur.execute("SET session_replication_role = replica")  # no FK triggers while loading
        for table in tables:
            columns = [
                (c, e)
                for c, k in _columns(cur, table)
                if (e := _expression(table, c, k)) is not None
            ]
            owner = OWNER.get(table, "t.run_id")
            names = ", ".join(f'"{c}"' for c, _ in columns)
            values = ", ".join(e for _, e in columns)
            t1, total = time.monotonic(), 0
            for low in range(1, runs + open_runs + 1, BATCH):
                cur.execute(
                    f"INSERT INTO {table} ({names}) SELECT {values}"
                    f" FROM seed_map m JOIN seed_tmpl_{table} t ON {owner} = m.tmpl"
                    f" WHERE m.g >= {low} AND m.g < {low + BATCH}"
                )
                total += cur.rowcount
            print(f"  {table}: {total:,} rows, {time.monotonic() - t1:.1f} s", flush=True)
        cur.execute("SET session_replication_role = DEFAULT")
        t1 = time.monotonic()
        for statement in restore:
            cur.execute(statement)
        print(
            f"  {len(restore)} indexes and constraints: {time.monotonic() - t1:.1f} s", flush=True
        )
        for table in tables:
            cur.execute(f"DROP TABLE seed_tmpl_{table}")
        cur.execute("DROP TABLE seed_map")
        cur.execute("CREATE TABLE dw_seed_info (built_at timestamptz, runs int, open_runs int)")
        cur.execute("INSERT INTO dw_seed_info VALUES (now(), %s, %s)", [runs, open_runs])
        t1 = time.monotonic()
        cur.execute("VACUUM (ANALYZE)")
        print(f"  vacuum analyze: {time.monotonic() - t1:.1f} s", flush=True)
        size = cur.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()
    with _admin() as conn:
        conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{final}"')
    print(f"built {final} in {time.monotonic() - t0:.0f} s, {size[0] if size else '?'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/seed.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1_000_000, help="closed runs (default 1,000,000)"
    )
    parser.add_argument("--open", type=int, default=100_000, help="open runs (default 100,000)")
    parser.add_argument(
        "--rebuild", action="store_true", help="drop the template and build it again"
    )
    parser.add_argument("--clone-into", metavar="DB", help="then copy it into this database")
    args = parser.parse_args(argv)
    name = template_name(args.runs, args.open)
    if args.rebuild and exists(name):
        with _admin() as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    if not exists(name):
        build(args.runs, args.open)
    if args.clone_into:
        print(f"cloned into {args.clone_into} in {clone_into(name, args.clone_into):.1f} s")
    print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
