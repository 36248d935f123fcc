"""Imported by ``app.autodiscover_tasks()`` so workers know the engine's Celery tasks."""

from durable_workflow.operations.bulk import run_bulk_job
from durable_workflow.schedules.tasks import schedule_tick
from durable_workflow.transport.celery import activity_task, repair, timer_task, workflow_task

__all__ = [
    "activity_task",
    "repair",
    "run_bulk_job",
    "schedule_tick",
    "timer_task",
    "workflow_task",
]
