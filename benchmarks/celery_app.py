"""The one Celery app the benchmark workers run: engine tasks and baseline tasks side by side.

Both the engine and the bare-Celery baselines use this app, the same Redis
broker and the same worker processes, so the comparison only differs in what
each task does. The result backend is only used by the chord baseline; every
other task ignores results.
"""

from __future__ import annotations

import os

from celery import Celery

from benchmarks import config, readiness  # noqa: F401  (readiness: the ready file)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

app = Celery("durable_workflow_benchmarks", include=["benchmarks.baseline_tasks"])
app.conf.update(
    broker_url=config.REDIS_URL,
    result_backend=config.REDIS_URL,
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
    result_expires=600,
)
if config.DB_CONNECTIONS == "reuse":
    # Celery's Django fix-up closes the database connection before and after
    # every task unless this is set; a new PostgreSQL connection per task costs
    # several milliseconds, more than the engine's own work on a small step.
    app.conf.update(CELERY_DB_REUSE_MAX=1_000_000)
app.autodiscover_tasks(["durable_workflow"])
