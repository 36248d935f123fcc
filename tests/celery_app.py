"""The Celery app used by acceptance tests (broker from DW_BROKER_URL, Redis by default)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

app = Celery("durable_workflow_tests")
app.conf.update(
    broker_url=os.environ.get("DW_BROKER_URL", "redis://127.0.0.1:6379/15"),
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
if os.environ.get("DW_CELERY_DB_REUSE_MAX"):
    # What the deployment docs recommend: Celery's fixup then leaves connections open.
    app.conf.CELERY_DB_REUSE_MAX = int(os.environ["DW_CELERY_DB_REUSE_MAX"])
app.autodiscover_tasks(["durable_workflow"])

if os.environ.get("DW_WORKER_BEAT"):
    from durable_workflow.transport.celery import beat_schedule

    app.conf.beat_schedule = beat_schedule()
