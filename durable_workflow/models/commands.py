"""Client and operator commands, and failure rows."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.choices import CommandStatus, CommandType, FailureCategory
from durable_workflow.models.manager import EngineManager
from durable_workflow.models.runs import WorkflowRun


class WorkflowCommand(models.Model):
    """Every client or operator command, accepted or rejected, with its reason."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    namespace = models.CharField(max_length=128, default="default")
    instance_id = models.CharField(max_length=191, db_index=True)
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.CASCADE, related_name="commands"
    )
    command_type = models.CharField(max_length=16, choices=CommandType.choices)
    status = models.CharField(max_length=16, choices=CommandStatus.choices)
    outcome = models.CharField(max_length=64)
    rejection_reason = models.CharField(max_length=64, null=True, blank=True)
    source = models.CharField(max_length=32, default="client")
    reason = models.TextField(blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_command"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.command_type} {self.instance_id}: {self.outcome}"


class WorkflowFailure(models.Model):
    """A failure with its full diagnostics (the history keeps the summary)."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="failures")
    source_kind = models.CharField(max_length=32)
    source_id = models.CharField(max_length=64, blank=True, default="")
    failure_category = models.CharField(max_length=32, choices=FailureCategory.choices)
    exception_type = models.CharField(max_length=255, blank=True, default="")
    exception_class = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField(blank=True, default="")
    traceback = models.TextField(blank=True, default="")
    non_retryable = models.BooleanField(default=False)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_failure"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.failure_category}: {self.exception_type}"
