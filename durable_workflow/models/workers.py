"""Worker registrations: which worker processes are alive, and what they offer."""

from __future__ import annotations

from django.db import models


class WorkerRegistration(models.Model):
    worker_id = models.CharField(max_length=191, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    max_concurrent_worker_sessions = models.PositiveIntegerField(default=0)
    sticky_cache = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, default="active")
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_worker_registration"
        ordering = ["-last_heartbeat_at"]
        indexes = [models.Index(fields=["status", "last_heartbeat_at"], name="dw_worker_live")]

    def __str__(self) -> str:
        return self.worker_id
