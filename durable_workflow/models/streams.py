"""Message streams: ordered, idempotent messages between workflows (and from outside)."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.manager import EngineManager
from durable_workflow.models.runs import WorkflowRun


class WorkflowMessage(models.Model):
    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    #: The target's namespace (a workflow sends within its own).
    namespace = models.CharField(max_length=128, default="default")
    target_instance_id = models.CharField(max_length=191)
    target_run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="inbox"
    )
    stream_key = models.CharField(max_length=128)
    sequence = models.PositiveIntegerField()
    channel = models.CharField(max_length=32, default="workflow_message")
    sender_instance_id = models.CharField(max_length=191, blank=True, default="")
    sender_run_id = models.UUIDField(null=True, blank=True)
    payload_reference = models.TextField(blank=True, default="")
    correlation_id = models.CharField(max_length=191, blank=True, default="")
    idempotency_key = models.CharField(max_length=191, null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, default="pending")
    consumed_by_run_id = models.UUIDField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_message"
        ordering = ["target_instance_id", "stream_key", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "target_instance_id", "stream_key", "sequence"],
                name="durable_workflow_message_sequence",
            ),
            models.UniqueConstraint(
                fields=["namespace", "target_instance_id", "stream_key", "idempotency_key"],
                name="durable_workflow_message_idempotency",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stream_key}#{self.sequence} -> {self.target_instance_id}"
