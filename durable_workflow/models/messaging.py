"""Signals and updates: every one sent, accepted or rejected, with its lifecycle."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.choices import SignalStatus, UpdateStatus
from durable_workflow.models.commands import WorkflowCommand
from durable_workflow.models.manager import EngineManager
from durable_workflow.models.runs import WorkflowRun


class WorkflowSignal(models.Model):
    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    instance_id = models.CharField(max_length=191, db_index=True)
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.CASCADE, related_name="signals"
    )
    command = models.OneToOneField(WorkflowCommand, on_delete=models.CASCADE, related_name="signal")
    signal_name = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=SignalStatus.choices)
    rejection_reason = models.CharField(max_length=64, null=True, blank=True)
    received_sequence = models.PositiveIntegerField(null=True, blank=True)
    applied_step = models.PositiveIntegerField(null=True, blank=True)
    received_at = models.DateTimeField()
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_signal"
        ordering = ["received_at"]
        indexes = [models.Index(fields=["run", "status"], name="dw_signal_run_status")]

    def __str__(self) -> str:
        return f"signal {self.signal_name} ({self.status})"


class WorkflowUpdate(models.Model):
    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    instance_id = models.CharField(max_length=191, db_index=True)
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.CASCADE, related_name="updates"
    )
    command = models.OneToOneField(WorkflowCommand, on_delete=models.CASCADE, related_name="update")
    update_name = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=UpdateStatus.choices)
    rejection_reason = models.CharField(max_length=64, null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    failure_message = models.TextField(blank=True, default="")
    applied_step = models.PositiveIntegerField(null=True, blank=True)
    accepted_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_update"
        ordering = ["accepted_at"]
        indexes = [models.Index(fields=["run", "status"], name="dw_update_run_status")]

    def __str__(self) -> str:
        return f"update {self.update_name} ({self.status})"
