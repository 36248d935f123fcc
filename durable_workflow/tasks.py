"""Imported by ``app.autodiscover_tasks()`` so workers know the engine's Celery tasks."""

from durable_workflow.transport.celery import activity_task, repair, timer_task, workflow_task

__all__ = ["activity_task", "repair", "timer_task", "workflow_task"]
