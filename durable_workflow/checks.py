"""System checks (``manage.py check``) for settings that would bite at run time."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections

from durable_workflow.exceptions import ConfigurationError


@checks.register("durable_workflow")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from durable_workflow.conf import get_settings

    try:
        get_settings()
    except ConfigurationError as exc:
        return [checks.Error(str(exc), id="durable_workflow.E001")]
    return []


@checks.register("durable_workflow")
def check_celery(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from durable_workflow.conf import get_settings
    from durable_workflow.transport.celery import celery_app

    messages: list[checks.CheckMessage] = []
    try:
        app = celery_app()
        for name in get_settings().CONNECTIONS:
            celery_app(name)
    except (ConfigurationError, ImportError) as exc:
        return [checks.Error(f"Celery app cannot be loaded: {exc}", id="durable_workflow.E002")]
    if app.main is None and not get_settings().CELERY_APP:
        messages.append(
            checks.Warning(
                "no Celery app is configured; workflow tasks would go to Celery's default app",
                hint="Set DURABLE_WORKFLOW['CELERY_APP'] to your app's dotted path.",
                id="durable_workflow.W001",
            )
        )
    if app.conf.task_always_eager:
        messages.append(_eager_message())
    return messages


def _eager_message() -> checks.CheckMessage:
    """What ``task_always_eager`` makes the engine do (transport/eager.py): a note under
    ``DEBUG``, a warning elsewhere (no worker runs anything in a deployment then)."""
    from durable_workflow.transport.eager import EAGER_BEHAVIOUR

    level = checks.Info if settings.DEBUG else checks.Warning
    return level(
        f"Celery runs tasks eagerly ({EAGER_BEHAVIOUR})",
        hint=(
            "Fine for development; a deployment needs task_always_eager off and workers. "
            "Tests: durable_workflow.testing's fake mode."
        ),
        id="durable_workflow.I002" if settings.DEBUG else "durable_workflow.W002",
    )


@checks.register("durable_workflow", checks.Tags.database)
def check_sqlite_mode(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    for alias in connections:
        conn = connections[alias]
        if conn.vendor != "sqlite":
            continue
        mode = (conn.settings_dict.get("OPTIONS") or {}).get("transaction_mode")
        if mode != "IMMEDIATE":
            messages.append(
                checks.Warning(
                    f"SQLite database {alias!r} does not use transaction_mode IMMEDIATE; "
                    "concurrent workers will see 'database is locked' far more often",
                    hint="Add 'OPTIONS': {'transaction_mode': 'IMMEDIATE', 'timeout': 20}.",
                    id="durable_workflow.W003",
                )
            )
    return messages


@checks.register("durable_workflow", checks.Tags.database)
def check_pooler(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A pooler in front of the engine's database without Django's flag for one (only
    with ``--database``, or from ``migrate``: it connects)."""
    from durable_workflow.operations.doctor import pooler

    alias = pooler.engine_alias()
    if alias not in (databases or ()):
        return []
    found = pooler.finding(alias)
    if found is None or not found["pooler"] or found["server_side_cursors_disabled"]:
        return []
    return [
        checks.Warning(
            f"database {alias!r} is reached through a connection pooler (PgBouncer?) and "
            f"DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] is not set",
            hint=pooler.ADVICE.format(alias=alias),
            id="durable_workflow.W020",
        )
    ]


@checks.register("durable_workflow")
def check_cache_locks(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if "locmem" in backend.lower() or "dummy" in backend.lower():
        return [
            checks.Info(
                "the default cache is process-local; singleton locks (schedule ticks) only "
                "hold within one process",
                hint="Use django-redis for deployments with several machines.",
                id="durable_workflow.I001",
            )
        ]
    return []


@checks.register("durable_workflow")
def check_compatibility(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from durable_workflow import compatibility
    from durable_workflow.conf import get_settings

    try:
        get_settings()
    except ConfigurationError:
        return []  # reported by check_settings
    current = compatibility.current_marker()
    if current is None or compatibility.supports(compatibility.local_markers(), current):
        return []
    return [
        checks.Warning(
            f"COMPATIBILITY_SUPPORTED does not include COMPATIBILITY_CURRENT ({current!r}): "
            "this process starts runs that it cannot execute itself",
            hint="Add the current marker to COMPATIBILITY_SUPPORTED, or leave the list empty.",
            id="durable_workflow.W004",
        )
    ]


@checks.register("durable_workflow")
def check_webhook_replay_cache(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Signed webhooks refuse a signature seen before only if the cache remembers it."""
    from durable_workflow.webhooks.conf import webhook_settings

    try:
        config = webhook_settings()
    except ConfigurationError as exc:
        return [checks.Error(str(exc), id="durable_workflow.E010")]
    if config.AUTH_METHOD != "signature":
        return []
    alias = config.SIGNATURE_REPLAY_CACHE
    backend = str(settings.CACHES.get(alias, {}).get("BACKEND", "")).lower()
    hint = "Point SIGNATURE_REPLAY_CACHE at a CACHES alias backed by Redis or Memcached."
    if not backend or "dummy" in backend:
        problem = "is not in CACHES: every signed request is refused"
        if backend:
            problem = "is a dummy cache: it forgets every signature, so replays are accepted"
        return [
            checks.Error(
                f"webhook SIGNATURE_REPLAY_CACHE {alias!r} {problem}",
                hint=hint,
                id="durable_workflow.E011",
            )
        ]
    if "locmem" in backend or "filebased" in backend:
        return [
            checks.Warning(
                f"webhook SIGNATURE_REPLAY_CACHE {alias!r} is not shared between machines "
                "(or, in memory, between processes): a signed request can be replayed "
                "against another web process",
                hint=hint,
                id="durable_workflow.W010",
            )
        ]
    return []


@checks.register("durable_workflow")
def check_database_routing(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from durable_workflow.store import database

    problems = database.routing_problems()
    if not problems:
        return []
    return [
        checks.Error(
            "database routing splits the engine's tables: " + "; ".join(problems),
            hint=(
                "Route every model of the durable_workflow app to one alias, for reads, "
                "writes and migrations alike (docs/how-to/deployment-topologies.md)."
            ),
            id="durable_workflow.E030",
        )
    ]


_BEAT_IDS = {"durable_workflow.repair": "durable_workflow.W031"}


@checks.register("durable_workflow")
def check_beat_entries(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The repair pass's beat entry (no database needed)."""
    return _beat_warnings(with_database=False)


@checks.register("durable_workflow", checks.Tags.database)
def check_beat_entries_for_schedules(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``check --database``: the schedule tick's entry while schedules exist (and entries
    kept by a database scheduler)."""
    return [
        message
        for message in _beat_warnings(with_database=True)
        if message.id != "durable_workflow.W031" or _database_scheduler_in_use()
    ]


def _database_scheduler_in_use() -> bool:
    from durable_workflow.operations import beat

    return beat.static_tasks()[1]


def _beat_warnings(*, with_database: bool) -> list[checks.CheckMessage]:
    from durable_workflow.operations import beat

    try:
        missing = beat.missing(with_database=with_database)
    except Exception:  # no Celery app (E002) or no tables yet (migrate comes first)
        return []
    return [
        checks.Warning(
            f"no Celery beat entry runs {task}: {beat.CONSEQUENCES[task]}",
            hint=beat.HINTS[task][0].upper()
            + beat.HINTS[task][1:]
            + " (silence this check if you do the latter).",
            id=_BEAT_IDS.get(task, "durable_workflow.W032"),
        )
        for task in missing
    ]


@checks.register("durable_workflow")
def check_guardrails(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The boot-time scan of workflow sources (``GUARDRAILS_BOOT``: warn, throw, silent)."""
    from durable_workflow import guardrails, registry
    from durable_workflow.conf import get_settings

    try:
        mode = get_settings().GUARDRAILS_BOOT
    except ConfigurationError:
        return []  # check_settings reports it
    if mode == "silent":
        return []
    level, code = (checks.Error, "E040") if mode == "throw" else (checks.Warning, "W040")
    return [
        level(
            str(finding),
            hint="docs/explanation/replay.md#guarded-calls; unsafe_calls = 'allow' on the "
            "class, or GUARDRAILS_BOOT = 'silent', to accept it",
            obj=cls,
            id=f"durable_workflow.{code}",
        )
        for cls in registry.workflows().values()
        for finding in guardrails.scan(cls)
    ]
