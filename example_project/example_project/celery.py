"""The project's Celery app: the standard Django wiring plus the repair beat entry."""

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Keep the worker's database connection between tasks (Celery closes it otherwise).
app.conf.update(CELERY_DB_REUSE_MAX=1000)
# Finds ``durable_workflow.tasks`` (the engine's fixed-name tasks) and any app's own tasks.
app.autodiscover_tasks()


@app.on_after_configure.connect
def _add_repair_schedule(sender: Celery, **kwargs: Any) -> None:
    # beat_schedule() reads settings.DURABLE_WORKFLOW; this package is imported while
    # Django's settings are still loading, so add the entry once Celery reads its config.
    from durable_workflow.transport.celery import beat_schedule

    sender.conf.beat_schedule = {**sender.conf.beat_schedule, **beat_schedule()}
