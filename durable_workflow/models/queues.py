"""Named work queues with limits: one row per queue, the lock its claims take turns on."""

from __future__ import annotations

from django.db import models

from durable_workflow.models.manager import EngineManager


class WorkQueue(models.Model):
    """A limited queue. Claims of its tasks lock this row, then count the queue's leases,
    so two workers cannot both take the last free slot."""

    objects = EngineManager()

    name = models.CharField(max_length=255, primary_key=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_work_queue"

    def __str__(self) -> str:
        return self.name


class WorkQueueStart(models.Model):
    """One attempt start on a rate-limited queue: the sliding window the rate is counted
    over. Rows older than the queue's period are deleted as claims go."""

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=255)
    started_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_work_queue_start"
        indexes = [models.Index(fields=["queue", "started_at"], name="dw_queue_start_window")]

    def __str__(self) -> str:
        return f"{self.queue} at {self.started_at}"
