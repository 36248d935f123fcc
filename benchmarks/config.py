"""Where the benchmark's services live. Every value can be overridden by environment."""

from __future__ import annotations

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS_DIR = pathlib.Path(os.environ.get("DW_BENCH_RESULTS", ROOT / "benchmarks" / "results"))

PG_HOST = os.environ.get("DW_BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("DW_BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("DW_BENCH_PG_USER", "postgres")
PG_PASSWORD = os.environ.get("DW_BENCH_PG_PASSWORD", "")
#: The engine's database (created and dropped by the harness).
PG_DB = os.environ.get("DW_BENCH_PG_DB", "dw_bench")
#: DBOS's system database on the same server (DBOS creates it; the harness drops it).
DBOS_DB = os.environ.get("DW_BENCH_DBOS_DB", "dw_bench_dbos")

REDIS_HOST = os.environ.get("DW_BENCH_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("DW_BENCH_REDIS_PORT", "6379"))
REDIS_DB = int(os.environ.get("DW_BENCH_REDIS_DB", "14"))
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"

#: How Celery workers hold their database connection:
#: ``reuse``    keep one connection per worker (Celery's CELERY_DB_REUSE_MAX; default here),
#: ``pool``     Django 5.1+'s psycopg pool (connections closed by Celery go back to the pool),
#: ``per-task`` Celery's default Django fix-up: a new connection for every task.
DB_CONNECTION_MODES = ("reuse", "pool", "per-task")
DB_CONNECTIONS = os.environ.get("DW_BENCH_DB_CONNECTIONS", "reuse")
if DB_CONNECTIONS not in DB_CONNECTION_MODES:
    raise SystemExit(f"DW_BENCH_DB_CONNECTIONS must be one of {DB_CONNECTION_MODES}")


def pg_url(database: str) -> str:
    auth = PG_USER + (f":{PG_PASSWORD}" if PG_PASSWORD else "")
    return f"postgresql://{auth}@{PG_HOST}:{PG_PORT}/{database}"
