"""What keeps concurrent test processes apart on the shared services.

Two runs of the suite on one machine, and the pytest-xdist workers of each run, share
one PostgreSQL, one Redis and one RabbitMQ. PostgreSQL and SQLite get a database per
worker (pytest-django adds the xdist worker to each test database name; scripts/test
makes the base names private to the run). On Redis, every key a test writes carries
this process's token: Celery's broker keys through kombu's ``global_keyprefix``
(queues, bindings, replies and broadcasts alike) and django-redis caches through
``KEY_PREFIX``, so nothing ever needs a ``FLUSHDB`` that would wipe another run.

Redis databases by role (override each URL with the variable named):
15 the Celery broker (``DW_BROKER_URL``), 14 caches and locks (``DW_CACHE_REDIS_URL``),
13 the schedule-race lock (``DW_SCHEDULE_LOCK_REDIS``).
"""

from __future__ import annotations

import os
import urllib.parse

BROKER_URL = os.environ.get("DW_BROKER_URL", "redis://127.0.0.1:6379/15")
CACHE_REDIS_URL = os.environ.get("DW_CACHE_REDIS_URL", "redis://127.0.0.1:6379/14")
LOCK_REDIS_URL = os.environ.get("DW_SCHEDULE_LOCK_REDIS", "redis://127.0.0.1:6379/13")


def token() -> str:
    """This test process's name on shared services: its run and its xdist worker.

    The run is ``DW_TEST_RUN`` (scripts/test sets it), else the first process that asked;
    it is put in the environment, so the worker processes and Celery workers a run
    starts inherit it (xdist workers also inherit ``PYTEST_XDIST_WORKER``).
    """
    run = os.environ.setdefault("DW_TEST_RUN", str(os.getpid()))
    return f"dw-test-{run}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


def key_prefix() -> str:
    """The prefix of every Redis key this process (and what it starts) writes."""
    return token() + ":"


def host_port(url: str) -> tuple[str, int]:
    """The host and port a service URL names (``redis://h:p/db``, ``amqp://u@h:p//``)."""
    parsed = urllib.parse.urlsplit(url)
    default = {"redis": 6379, "amqp": 5672, "pyamqp": 5672}.get(parsed.scheme, 0)
    return parsed.hostname or "127.0.0.1", parsed.port or default


def delete_keys(url: str, prefix: str) -> None:
    """Delete the keys under ``prefix`` in the Redis database at ``url`` (never the rest)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def redis_cache(url: str = CACHE_REDIS_URL) -> dict[str, str]:
    """A django-redis ``CACHES`` entry whose keys are this process's own."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "KEY_PREFIX": token(),
    }
