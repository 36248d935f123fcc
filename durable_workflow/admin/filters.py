"""List filters whose choices come from code, not from a DISTINCT over a big table."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from durable_workflow import registry
from durable_workflow.engine.events import EventType


class _StaticFilter(admin.SimpleListFilter):
    field = ""

    def choices_from_code(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = set(self.choices_from_code())
        typed_in = self.value()
        if typed_in:
            values.add(typed_in)  # keep a typed-in value selectable
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(**{self.field: self.value()})
        return queryset


class WorkflowTypeFilter(_StaticFilter):
    title = "workflow type"
    parameter_name = "workflow_type"
    field = "workflow_type"

    def choices_from_code(self) -> list[str]:
        return list(registry.workflows())


class ActivityTypeFilter(_StaticFilter):
    title = "activity type"
    parameter_name = "activity_type"
    field = "activity_type"

    def choices_from_code(self) -> list[str]:
        return list(registry.activities())


class EventTypeFilter(_StaticFilter):
    title = "event type"
    parameter_name = "event_type"
    field = "event_type"

    def choices_from_code(self) -> list[str]:
        return [str(e) for e in EventType]


class QueueFilter(_StaticFilter):
    """Queues named by settings and registered classes (``?queue=`` accepts any)."""

    title = "queue"
    parameter_name = "queue"
    field = "queue"

    def choices_from_code(self) -> list[str]:
        from durable_workflow.operations.queues import configured_scopes

        try:
            return [queue for _, queue in configured_scopes()]
        except Exception:  # a broken Celery config must not break the page
            return []
