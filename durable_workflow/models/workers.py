"""Worker registrations: which worker processes are alive, and what they offer."""

from __future__ import annotations

from django.db import models

from durable_workflow.models.manager import EngineManager


class WorkerRegistration(models.Model):
    objects = EngineManager()

    worker_id = models.CharField(max_length=191, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    max_concurrent_worker_sessions = models.PositiveIntegerField(default=0)
    sticky_cache = models.JSONField(default=dict, blank=True)
    #: The Celery queue only this worker's node consumes (sticky and session routing).
    direct_queue = models.CharField(max_length=255, null=True, blank=True)
    #: Compatibility markers this worker may execute (``["*"]``: any).
    compatibility = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, default="active")
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    #: Since when this process's tasks keep failing on database or broker errors
    #: (``None``: healthy). Such a process is no routing target while it lasts.
    failing_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_worker_registration"
        ordering = ["-last_heartbeat_at"]
        indexes = [models.Index(fields=["status", "last_heartbeat_at"], name="dw_worker_live")]

    def __str__(self) -> str:
        return self.worker_id


class WorkerSession(models.Model):
    """An activity-affinity lease: in-session activities run on the holder only."""

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    namespace = models.CharField(max_length=128)
    session_id = models.CharField(max_length=255)
    connection = models.CharField(max_length=255, null=True, blank=True)
    queue = models.CharField(max_length=255, null=True, blank=True)
    requirements = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, default="active")
    lease_owner = models.CharField(max_length=191, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    ttl_expires_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    failure_reason = models.CharField(max_length=32, null=True, blank=True)
    lease_seconds = models.PositiveIntegerField(default=120)
    ttl_seconds = models.PositiveIntegerField(default=1800)
    max_concurrent_activities = models.PositiveIntegerField(default=1)
    create_if_missing = models.BooleanField(default=True)
    allow_reacquire_after_failure = models.BooleanField(default=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_worker_session"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "session_id"], name="durable_workflow_session_unique"
            )
        ]
        indexes = [
            models.Index(fields=["lease_owner", "status"], name="dw_session_owner_status"),
            models.Index(fields=["status"], name="dw_session_status"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} ({self.status})"
