"""Registered worker processes and message streams."""

from __future__ import annotations

import datetime as dt

from django.contrib import admin

from durable_workflow import clock
from durable_workflow.admin.base import EngineAdmin
from durable_workflow.conf import get_settings
from durable_workflow.models import WorkerRegistration, WorkflowMessage


@admin.register(WorkerRegistration)
class WorkerRegistrationAdmin(EngineAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "status",
        "live",
        "queue_list",
        "compatibility_list",
        "last_heartbeat_at",
        "started_at",
    )
    list_filter = ("status", ("last_heartbeat_at", admin.DateFieldListFilter))
    search_fields = ("=worker_id", "^hostname")
    search_help_text = "Worker id or hostname prefix."
    ordering = ("-last_heartbeat_at",)

    @admin.display(boolean=True, description="live")
    def live(self, worker: WorkerRegistration) -> bool:
        stale = dt.timedelta(seconds=get_settings().WORKER_STALE_AFTER_SECONDS)
        return worker.status == "active" and worker.last_heartbeat_at >= clock.now() - stale

    @admin.display(description="queues")
    def queue_list(self, worker: WorkerRegistration) -> str:
        return ", ".join(str(q) for q in worker.queues or [])

    @admin.display(description="compatibility markers")
    def compatibility_list(self, worker: WorkerRegistration) -> str:
        return ", ".join(str(m) for m in worker.compatibility or []) or "unmarked only"


@admin.register(WorkflowMessage)
class WorkflowMessageAdmin(EngineAdmin):
    list_display = (
        "created_at",
        "target_instance_id",
        "stream_key",
        "sequence",
        "channel",
        "status",
        "sender_instance_id",
        "consumed_at",
    )
    list_filter = ("status", "channel", ("created_at", admin.DateFieldListFilter))
    search_fields = ("=target_instance_id", "=stream_key", "=sender_instance_id")
    search_help_text = "Target or sender instance id, or stream key."
