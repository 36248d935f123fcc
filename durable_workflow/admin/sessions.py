"""Worker sessions: who holds which session, until when, and why one ended."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from durable_workflow import clock
from durable_workflow.admin.base import EngineAdmin
from durable_workflow.models import WorkerSession
from durable_workflow.store import sessions as session_store


@admin.register(WorkerSession)
class WorkerSessionAdmin(EngineAdmin):
    list_display = (
        "session_id",
        "status",
        "failure_reason",
        "lease_owner",
        "queue",
        "requirement_list",
        "active_activities",
        "lease_expires_at",
        "ttl_expires_at",
        "updated_at",
    )
    list_filter = ("status", "failure_reason", "queue", ("created_at", admin.DateFieldListFilter))
    search_fields = ("=session_id", "=lease_owner")
    search_help_text = "Session id or holder worker id."
    ordering = ("-updated_at",)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Statuses move on lazily (lease, TTL, silent holder): bring them up to date first.
        from durable_workflow.executor import sessions

        sessions.refresh_all()
        return super().changelist_view(request, extra_context)

    @admin.display(description="requirements")
    def requirement_list(self, session: WorkerSession) -> str:
        return ", ".join(str(item) for item in session.requirements or []) or "-"

    @admin.display(description="running activities")
    def active_activities(self, session: WorkerSession) -> int:
        return session_store.running_attempts(session.session_id, now=clock.now())
