"""Django settings for the reliability suite's harness, Celery workers and loops.

Its own PostgreSQL cluster and Redis server (reliability/config.py). Each process names
its database connections after its role (``DW_CHAOS_ROLE``, see ``reliability.apps``),
so faults can aim at the workers' connections only. A scenario that needs settings other
than the engine's defaults passes them as JSON in ``DW_CHAOS_ENGINE_SETTINGS`` (and says
so in its report).
"""

from __future__ import annotations

import json
import os

from reliability import config

SECRET_KEY = "durable-workflow-reliability"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS: list[str] = []

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "durable_workflow",
    "reliability",  # its ``workflows`` module registers the workload
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": config.PG_DB,
        "USER": config.PG_USER,
        "HOST": config.PG_HOST,
        "PORT": str(config.PG_PORT),
        # One connection per process, kept (docs/how-to/deploying-workers.md).
        "CONN_MAX_AGE": 600,
        # reliability.apps names each connection "<role>:<pid>" (DW_CHAOS_ROLE).
        "OPTIONS": {"connect_timeout": 5},
    }
}

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": config.CACHE_URL,
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 2, "SOCKET_TIMEOUT": 2},
    }
}

DURABLE_WORKFLOW = {
    "CELERY_APP": "reliability.celery_app.app",
    **json.loads(os.environ.get("DW_CHAOS_ENGINE_SETTINGS") or "{}"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "stamped": {"format": "[%(asctime)s: %(levelname)s/%(processName)s] %(name)s: %(message)s"}
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "stamped"}},
    "root": {"level": "WARNING", "handlers": ["stderr"]},
    "loggers": {"durable_workflow": {"level": os.environ.get("DW_CHAOS_ENGINE_LOG", "WARNING")}},
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
