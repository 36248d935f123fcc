"""Django settings for the benchmark harness and its Celery workers.

Own PostgreSQL database (``dw_bench``), own Redis database (14), no test
settings shared with the library's suite.
"""

from __future__ import annotations

import os

from benchmarks import config

SECRET_KEY = "durable-workflow-benchmarks"
DEBUG = False  # DEBUG=True would keep every query in memory
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS: list[str] = []

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "durable_workflow",
    "benchmarks",  # its ``workflows`` module registers the benchmark workflows
]

# The harness process serves the admin to time its pages (scenario ``aged``); the
# workers it starts do without (``workers.launch_worker`` sets DW_BENCH_ADMIN=0).
ADMIN = os.environ.get("DW_BENCH_ADMIN") == "1"
if ADMIN:
    INSTALLED_APPS[:0] = [
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.admin",
    ]
    ROOT_URLCONF = "benchmarks.urls"
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

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": config.PG_DB,
        "USER": config.PG_USER,
        "PASSWORD": config.PG_PASSWORD,
        "HOST": config.PG_HOST,
        "PORT": str(config.PG_PORT),
        # Pooled connections must not also be persistent (Django refuses both).
        "CONN_MAX_AGE": 0 if config.DB_CONNECTIONS == "pool" else 600,
        "OPTIONS": {
            # Connections per worker show in pg_stat_activity (the scaling scenario).
            "application_name": f"dw-bench-{os.environ.get('DW_BENCH_WORKER_NAME', 'harness')}",
            **({"pool": {"min_size": 1, "max_size": 4}} if config.DB_CONNECTIONS == "pool" else {}),
        },
    }
}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

DURABLE_WORKFLOW = {
    "CELERY_APP": "benchmarks.celery_app.app",
    # The queue_limit scenario: two slots, as many as its two solo workers have.
    "QUEUES": {"bench-limited": {"concurrency": 2}},
    # The queue_limit scenario's third side: no eager activity starts nor sibling batches.
    "EAGER_ACTIVITIES": os.environ.get("DW_BENCH_EAGER_ACTIVITIES", "1") == "1",
    # The floor scenario's queued step: every task its own message.
    "EAGER_WORKFLOW_TASKS": os.environ.get("DW_BENCH_EAGER_WORKFLOW_TASKS", "1") == "1",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "root": {"level": "WARNING"},
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
