"""Service checks and the lifecycle of the benchmark's databases."""

from __future__ import annotations

import socket

from benchmarks import config


class ServiceDown(SystemExit):
    pass


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def check_services() -> None:
    """Fail fast, with a clear message, when PostgreSQL or Redis is not there."""
    missing = []
    if not _reachable(config.PG_HOST, config.PG_PORT):
        missing.append(
            f"PostgreSQL is not reachable at {config.PG_HOST}:{config.PG_PORT} "
            "(start it, or set DW_BENCH_PG_HOST / DW_BENCH_PG_PORT)"
        )
    if not _reachable(config.REDIS_HOST, config.REDIS_PORT):
        missing.append(
            f"Redis is not reachable at {config.REDIS_HOST}:{config.REDIS_PORT} "
            "(start it, or set DW_BENCH_REDIS_HOST / DW_BENCH_REDIS_PORT)"
        )
    if missing:
        raise ServiceDown("benchmarks cannot run:\n  " + "\n  ".join(missing))
    import psycopg

    try:
        with psycopg.connect(config.pg_url("postgres"), connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise ServiceDown(f"PostgreSQL refused the benchmark's connection: {exc}") from exc


def _admin():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(config.pg_url("postgres"), autocommit=True, connect_timeout=5)


def drop_database(name: str) -> None:
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_database(name: str) -> None:
    """A fresh, empty database (dropped first if a previous run left it)."""
    drop_database(name)
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def server_versions() -> dict[str, str]:
    versions = {}
    with _admin() as conn:
        versions["postgresql"] = str(conn.execute("SHOW server_version").fetchone()[0])
    versions["redis"] = str(redis_client().info("server").get("redis_version"))
    return versions


def redis_client():  # type: ignore[no-untyped-def]
    import redis

    return redis.Redis.from_url(config.REDIS_URL)


def flush_redis() -> None:
    redis_client().flushdb()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def flush_engine_tables() -> None:
    """Empty every table between scenarios (no worker may be running)."""
    from django.core.management import call_command
    from django.db import connections

    call_command("flush", interactive=False, verbosity=0)
    connections.close_all()
