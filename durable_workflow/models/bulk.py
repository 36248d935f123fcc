"""Bulk jobs: one operator action over a large selection of runs, done in batches."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.manager import EngineManager


class BulkJobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class BulkItemState(models.TextChoices):
    PENDING = "pending"
    #: The command was accepted.
    DONE = "done"
    #: The engine refused it (the run was closed, not parked, not current...).
    SKIPPED = "skipped"
    #: The command raised: the detail says what.
    FAILED = "failed"


class BulkJob(models.Model):
    """An operation (cancel, terminate, repair, retry, reset, archive) over a selection
    of runs, processed batch by batch outside the request; one item per selected run."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    operation = models.CharField(max_length=16)
    reason = models.TextField()
    operator = models.CharField(max_length=150)
    #: How the selection was made (the runs list's query string, or the CLI's filter).
    filter = models.TextField(blank=True, default="")
    #: The operation's form data besides the reason (a reset's point).
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=BulkJobStatus.choices, default=BulkJobStatus.QUEUED
    )
    batch_size = models.PositiveIntegerField()
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    #: Batches committed so far.
    batches = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_bulk_job"
        verbose_name = "bulk job"
        indexes = [models.Index(fields=["status", "created_at"], name="dw_bulk_status_idx")]

    def __str__(self) -> str:
        return f"{self.operation} of {self.total} runs ({self.status})"

    @property
    def processed(self) -> int:
        return self.done + self.skipped + self.failed


class BulkJobItem(models.Model):
    """One selected run of a bulk job and what the operation did to it."""

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(BulkJob, on_delete=models.CASCADE, related_name="items")
    instance_id = models.CharField(max_length=191)
    #: The pinned run (``None``: the instance's current run).
    run_id = models.UUIDField(null=True, blank=True)
    state = models.CharField(
        max_length=16, choices=BulkItemState.choices, default=BulkItemState.PENDING
    )
    outcome = models.CharField(max_length=64, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    batch = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_bulk_job_item"
        verbose_name = "bulk job item"
        indexes = [models.Index(fields=["job", "state", "id"], name="dw_bulk_item_state_idx")]
