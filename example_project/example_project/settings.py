"""Settings for the durable_workflow example project.

Embedded default: a SQLite file and Kombu's ``filesystem://`` broker under ``var/``, so
nothing but Python is needed. Production shape: set ``EXAMPLE_PG_NAME`` to use PostgreSQL
(127.0.0.1, user postgres; ``EXAMPLE_PG_HOST``/``_USER``/``_PASSWORD``/``_PORT`` override)
and ``EXAMPLE_BROKER_URL`` (e.g. ``redis://127.0.0.1:6379/0``) to use a real broker.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

SECRET_KEY = os.environ.get("EXAMPLE_SECRET_KEY", "example-only-not-secret")
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "durable_workflow",
    "orders",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "example_project.urls"
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

VAR_DIR.mkdir(exist_ok=True)

if os.environ.get("EXAMPLE_PG_NAME"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ["EXAMPLE_PG_NAME"],
            "HOST": os.environ.get("EXAMPLE_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("EXAMPLE_PG_PORT", "5432"),
            "USER": os.environ.get("EXAMPLE_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("EXAMPLE_PG_PASSWORD", ""),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "example.sqlite3",
            # IMMEDIATE takes the write lock at BEGIN, so two processes wait for each
            # other (up to ``timeout`` seconds) instead of failing mid-transaction.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    }

if os.environ.get("EXAMPLE_BROKER_URL"):
    CELERY_BROKER_URL = os.environ["EXAMPLE_BROKER_URL"]
else:
    _BROKER_DIR = VAR_DIR / "broker"
    _BROKER_FOLDERS = {
        # One folder for both directions: producers and the worker share a queue.
        "data_folder_in": _BROKER_DIR / "queue",
        "data_folder_out": _BROKER_DIR / "queue",
        "processed_folder": _BROKER_DIR / "processed",
        "control_folder": _BROKER_DIR / "control",
    }
    for _folder in _BROKER_FOLDERS.values():
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://localhost//"  # the host part is ignored
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **{key: str(folder) for key, folder in _BROKER_FOLDERS.items()},
        # The default (1 s) makes every hop of a workflow wait; 50 ms keeps it snappy.
        "polling_interval": 0.05,
    }

CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

DURABLE_WORKFLOW = {"CELERY_APP": "example_project.celery.app"}
# The example runs on one machine, where a process-local cache is enough.
SILENCED_SYSTEM_CHECKS = ["durable_workflow.I001"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"activity": {"format": "    [worker] %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "activity": {"class": "logging.StreamHandler", "formatter": "activity"},
    },
    "loggers": {
        # Not propagated: under the worker, Celery's root handler would print it again.
        "durable_workflow": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "orders": {"handlers": ["activity"], "level": "INFO", "propagate": False},
    },
}
