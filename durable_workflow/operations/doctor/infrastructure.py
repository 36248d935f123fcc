"""Checks of what the engine runs on: database, migrations, Celery, broker, workers, cache."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings as django_settings
from django.core.cache import caches
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.operations.doctor.result import (
    ERROR,
    OK,
    WARNING,
    CheckResult,
    DoctorContext,
)
from durable_workflow.store import database, dbclock
from durable_workflow.transport.eager import EAGER_BEHAVIOUR

_CLOCK_SKEW_WARNING = 2.0
_CLOCK_SKEW_ERROR = 30.0


def _alias() -> str:
    return database.alias()


def check_database(ctx: DoctorContext) -> CheckResult:
    alias = _alias()
    conn = connections[alias]
    title = "Database reachable"
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return CheckResult(
            "database",
            title,
            ERROR,
            f"database {alias!r} ({conn.vendor}) is unreachable: {exc}",
            "Check DATABASES in settings and that the database server is running.",
        )
    details = {"alias": alias, "vendor": conn.vendor}
    if conn.vendor not in ("sqlite", "postgresql", "mysql") and not (
        conn.features.has_select_for_update
    ):
        return CheckResult(
            "database",
            title,
            ERROR,
            f"database {alias!r} ({conn.vendor}) has no SELECT ... FOR UPDATE",
            "Use PostgreSQL (recommended), MySQL/MariaDB or SQLite.",
            details=details,
        )
    message = f"database {alias!r} ({conn.vendor}) answers"
    if conn.vendor == "sqlite":
        message += "; SQLite serializes writers, fine for one worker process"
    return CheckResult("database", title, OK, message, details=details)


def _default_plan() -> list[Any]:
    executor = MigrationExecutor(connections[_alias()])
    return list(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def check_migrations(ctx: DoctorContext) -> CheckResult:
    plan = ctx.migration_plan() if ctx.migration_plan else _default_plan()
    pending = [f"{m.app_label}.{m.name}" for m, backwards in plan if not backwards]
    ours = [name for name in pending if name.startswith("durable_workflow.")]
    title = "Migrations applied"
    if ours:
        return CheckResult(
            "migrations",
            title,
            ERROR,
            f"{len(ours)} durable_workflow migration(s) not applied: {', '.join(ours)}",
            "Run `python manage.py migrate` before starting workers.",
            details={"pending": pending},
        )
    if pending:
        return CheckResult(
            "migrations",
            title,
            WARNING,
            f"{len(pending)} migration(s) of other apps not applied: {', '.join(pending[:10])}",
            "Run `python manage.py migrate`.",
            details={"pending": pending},
        )
    return CheckResult("migrations", title, OK, "every migration is applied")


def _connections() -> list[str | None]:
    return [None, *get_settings().CONNECTIONS]


def _label(connection: str | None) -> str:
    return connection or "default"


def _eager(connection: str | None) -> bool:
    from durable_workflow.transport.celery import is_eager

    try:
        return is_eager(connection)
    except Exception:  # an unloadable app: reported by celery_app
        return False


def check_celery_app(ctx: DoctorContext) -> CheckResult:
    from durable_workflow.transport.celery import TASK_NAMES, celery_app

    title = "Celery app"
    try:
        apps = {connection: celery_app(connection) for connection in _connections()}
    except Exception as exc:
        return CheckResult(
            "celery_app",
            title,
            ERROR,
            f"the Celery app cannot be loaded: {exc}",
            "Set DURABLE_WORKFLOW['CELERY_APP'] (and CONNECTIONS) to importable Celery apps.",
        )
    problems: list[str] = []
    for connection, app in apps.items():
        name = _label(connection)
        if connection is None and app.main is None and not get_settings().CELERY_APP:
            problems.append("no Celery app is configured; Celery's default app would be used")
        if app.conf.task_always_eager and not django_settings.DEBUG:
            problems.append(f"{name}: {EAGER_BEHAVIOUR}")
        pool = str(app.conf.worker_pool or "")
        if pool in ("gevent", "eventlet"):
            problems.append(
                f"{name}: the {pool} pool monkey-patches greenlets; use prefork or solo"
            )
        missing = sorted(set(TASK_NAMES.values()) - set(app.tasks))
        if missing:
            problems.append(f"{name}: tasks not registered: {', '.join(missing)}")
    eager = sorted(_label(c) for c, app in apps.items() if app.conf.task_always_eager)
    details = {"apps": {_label(c): str(app.main) for c, app in apps.items()}, "eager": eager}
    if problems:
        return CheckResult(
            "celery_app",
            title,
            WARNING,
            "; ".join(problems),
            "Fix the Celery app configuration; `app.autodiscover_tasks()` registers the tasks.",
            details=details,
        )
    message = "the Celery app loads"
    if eager:
        message += f"; {', '.join(eager)}: {EAGER_BEHAVIOUR}"
    return CheckResult("celery_app", title, OK, message, details=details)


def probe_broker(connection: str | None, timeout: float) -> tuple[str, str | None]:
    """(broker URI with the password masked, error text or ``None``)."""
    from durable_workflow.transport.celery import celery_app

    conn = celery_app(connection).connection_for_write(connect_timeout=timeout)
    uri = conn.as_uri()
    try:
        # kombu-stubs type these as int; kombu sleeps and times out on float seconds.
        conn.ensure_connection(
            max_retries=1,
            interval_start=0,
            interval_step=0.2,  # type: ignore[arg-type]
            interval_max=0.2,  # type: ignore[arg-type]
            timeout=timeout,  # type: ignore[arg-type]
        )
    except Exception as exc:
        return uri, f"{type(exc).__name__}: {exc}"
    finally:
        conn.release()
    return uri, None


def check_broker(ctx: DoctorContext) -> CheckResult:
    title = "Broker reachable"
    failures: list[str] = []
    brokers: dict[str, dict[str, Any]] = {}
    for connection in _connections():
        if _eager(connection):
            brokers[_label(connection)] = {"url": None, "reachable": True, "eager": True}
            continue  # nothing is published: tasks run where they are committed
        try:
            uri, error = probe_broker(connection, ctx.broker_timeout)
        except Exception as exc:  # an unloadable app: reported by celery_app
            uri, error = "?", str(exc)
        brokers[_label(connection)] = {"url": uri, "reachable": error is None}
        if error:
            failures.append(f"{_label(connection)} ({uri}): {error}")
    if failures:
        return CheckResult(
            "broker",
            title,
            ERROR,
            "broker unreachable: " + "; ".join(failures),
            "Start the broker, or fix broker_url of the Celery app. Nothing runs without it; "
            "work accepted meanwhile stays in the database and the repair pass re-sends it.",
            details={"brokers": brokers},
        )
    return CheckResult("broker", title, OK, "every broker answers", details={"brokers": brokers})


def check_cache_locks(ctx: DoctorContext) -> CheckResult:
    title = "Cache supports locks"
    backend = django_settings.CACHES.get("default", {}).get("BACKEND", "")
    cache = caches["default"]
    details = {"backend": backend}
    key = "durable_workflow:doctor"
    try:
        if hasattr(cache, "lock"):  # django-redis
            lock = cache.lock(key, timeout=5)
            if lock.acquire(blocking=False):
                lock.release()
            return CheckResult(
                "cache_locks", title, OK, "the cache provides distributed locks", details=details
            )
        if "dummy" in backend.lower():
            return CheckResult(
                "cache_locks",
                title,
                ERROR,
                "the default cache is DummyCache: it cannot hold a lock",
                "Configure django-redis as the default cache.",
                details=details,
            )
        cache.add(key, 1, timeout=5)
        cache.delete(key)
    except Exception as exc:
        return CheckResult(
            "cache_locks",
            title,
            ERROR,
            f"the default cache is unreachable: {exc}",
            "Start the cache server or fix CACHES['default'].",
            details=details,
        )
    if "locmem" in backend.lower() or "filebased" in backend.lower():
        return CheckResult(
            "cache_locks",
            title,
            WARNING,
            "the default cache is process-local: singleton locks only hold within one process",
            "Use django-redis when workers run on several machines.",
            details=details,
        )
    return CheckResult("cache_locks", title, OK, "the cache offers an atomic add", details=details)


def _database_now() -> dt.datetime:
    return dbclock.database_now(_alias())


def check_clock_skew(ctx: DoctorContext) -> CheckResult:
    title = "Clock agrees with the database"
    try:
        before = clock.now()
        db_now = _database_now()
        after = clock.now()
    except NotImplementedError as exc:
        return CheckResult("clock_skew", title, OK, f"not measured on {exc}")
    skew = (db_now - (before + (after - before) / 2)).total_seconds()
    details = {"skew_seconds": round(skew, 3), "database_now": db_now.isoformat()}
    message = f"this process and the database differ by {skew:+.3f} s"
    step = "Run NTP (chrony, systemd-timesyncd) on every worker and database host."
    if abs(skew) >= _CLOCK_SKEW_ERROR:
        return CheckResult("clock_skew", title, ERROR, message, step, details=details)
    if abs(skew) >= _CLOCK_SKEW_WARNING:
        return CheckResult("clock_skew", title, WARNING, message, step, details=details)
    return CheckResult("clock_skew", title, OK, message, details=details)
