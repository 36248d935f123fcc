"""Settings for the library's own test suite.

DW_TEST_DB selects the database: ``sqlite`` (default) or ``postgres``
(127.0.0.1:5432, user postgres, trust auth; override with DW_PG_* variables).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

SECRET_KEY = "durable-workflow-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]
# The test app keeps workflows that read the clock or module state on purpose (fixtures
# of the run-time guards and the boot scan): ``manage.py check`` leaves those findings out.
SILENCED_SYSTEM_CHECKS = ["durable_workflow.W040"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "durable_workflow",
    "tests.testapp",
]

_DB = os.environ.get("DW_TEST_DB", "sqlite")
DATABASES: dict[str, dict[str, Any]]
if _DB == "postgres":
    DATABASES = {
        "default": {
            # Django's backend, with a cheaper flush between tests (tests/pg_backend).
            "ENGINE": "tests.pg_backend",
            "NAME": os.environ.get("DW_PG_NAME", "postgres"),
            "USER": os.environ.get("DW_PG_USER", "postgres"),
            "HOST": os.environ.get("DW_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("DW_PG_PORT", "5432"),
            "TEST": {"NAME": os.environ.get("DW_PG_TEST_NAME", "test_durable_workflow")},
            # Fault tests find one worker's backends by it (pg_terminate_backend).
            "OPTIONS": {"application_name": os.environ.get("DW_PG_APPLICATION_NAME", "dw-tests")},
            # Django's flag for a transaction-mode pooler (tests through PgBouncer set it).
            "DISABLE_SERVER_SIDE_CURSORS": os.environ.get("DW_PG_POOLER_FLAG") == "1",
        }
    }
else:
    # One file per test process, so parallel runs never share (or delete) a database.
    _path = os.environ.get(
        "DW_SQLITE_PATH",
        os.path.join(tempfile.gettempdir(), f"durable_workflow_tests_{os.getpid()}.sqlite3"),
    )
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _path,
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
            "TEST": {"NAME": _path + ".test"},
        }
    }

# A second database for the engine's tables, on the same server. Tests that request it
# route the engine there themselves (tests/routers.py); with DW_TEST_ROUTED=1 every test
# does (scripts/test --routed: the integration tier with the application on ``default``
# and the engine on ``workflows``).
DATABASES["workflows"] = {
    **DATABASES["default"],
    "NAME": os.environ.get("DW_PG_ENGINE_NAME", DATABASES["default"]["NAME"])
    if _DB == "postgres"
    else DATABASES["default"]["NAME"] + ".engine",
    "TEST": {"NAME": DATABASES["default"]["TEST"]["NAME"] + "_engine"},
}
if os.environ.get("DW_TEST_ROUTED") == "1":
    DATABASE_ROUTERS = ["tests.routers.EngineRouter"]

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

DURABLE_WORKFLOW = {
    "CELERY_APP": "tests.celery_app.app",
    "ACTIVITY_LEASE_SECONDS": int(os.environ.get("DW_ACTIVITY_LEASE_SECONDS", "300")),
    "REDISPATCH_AFTER_SECONDS": 1,
    "REDISPATCH_MAX_BACKOFF_SECONDS": int(
        os.environ.get("DW_REDISPATCH_MAX_BACKOFF_SECONDS", "300")
    ),
    "REPAIR_INTERVAL_SECONDS": 1.0,
    # Outage tests shorten the back-off of --loop commands (and of nothing else).
    "LOOP_BACKOFF_INITIAL_SECONDS": float(os.environ.get("DW_LOOP_BACKOFF_SECONDS", "1")),
    "LOOP_BACKOFF_MAX_SECONDS": float(os.environ.get("DW_LOOP_BACKOFF_MAX_SECONDS", "30")),
    "WORKER_CAPABILITIES": [
        c for c in os.environ.get("DW_WORKER_CAPABILITIES", "").split(",") if c
    ],
    "WORKER_HEARTBEAT_SECONDS": float(os.environ.get("DW_WORKER_HEARTBEAT_SECONDS", "10")),
    # Compatibility markers of this process (acceptance tests start workers of two builds).
    "COMPATIBILITY_CURRENT": os.environ.get("DW_COMPATIBILITY_CURRENT") or None,
    "COMPATIBILITY_SUPPORTED": [
        m for m in os.environ.get("DW_COMPATIBILITY_SUPPORTED", "").split(",") if m
    ],
    "WORKER_STALE_AFTER_SECONDS": int(os.environ.get("DW_WORKER_STALE_AFTER_SECONDS", "30")),
    "WORKER_UNHEALTHY_AFTER_FAILURES": int(
        os.environ.get("DW_WORKER_UNHEALTHY_AFTER_FAILURES", "3")
    ),
    "MAX_CONCURRENT_WORKER_SESSIONS": int(os.environ.get("DW_MAX_CONCURRENT_WORKER_SESSIONS", "0")),
    "WORKFLOW_TASK_MAX_ATTEMPTS": int(os.environ.get("DW_WORKFLOW_TASK_MAX_ATTEMPTS", "5")),
    # Step-by-step tests drive each task themselves; real workers (and one test) use it.
    "EAGER_WORKFLOW_TASKS": os.environ.get("DW_EAGER_WORKFLOW_TASKS", "0") == "1",
    "EAGER_ACTIVITIES": os.environ.get("DW_EAGER_ACTIVITIES", "0") == "1",
}
# More DURABLE_WORKFLOW keys for worker subprocesses, as a JSON object (e.g. payload codecs).
DURABLE_WORKFLOW.update(json.loads(os.environ.get("DW_EXTRA_SETTINGS_JSON", "{}")))

ROOT_URLCONF = "tests.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("DW_TEST_JSON_LOGS") == "1":
    # A worker started by an acceptance test writes the engine's lines (and the test
    # app's own) as JSON, with the workflow's fields, as the operations guide shows.
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"workflow": {"()": "durable_workflow.logs.WorkflowContextFilter"}},
        "formatters": {"json": {"()": "durable_workflow.operations.log_format.JsonFormatter"}},
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["workflow"],
            }
        },
        "loggers": {
            name: {"handlers": ["json"], "level": "INFO", "propagate": False}
            for name in ("durable_workflow", "tests.activities")
        },
    }
