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


class ClosedReasonFilter(_StaticFilter):
    """The reasons the engine closes runs with, listed from code: asking the database
    for its distinct values reads the whole runs table on every changelist."""

    title = "closed reason"
    parameter_name = "closed_reason__exact"  # the URL Django's field filter used
    field = "closed_reason"

    def choices_from_code(self) -> list[str]:
        return ["cancelled", "completed", "continued", "failed", "terminated", "timed_out"]


class NamespaceFilter(_StaticFilter):
    """The default namespace and those schedules use (``?namespace=`` accepts any)."""

    title = "namespace"
    parameter_name = "namespace"
    field = "namespace"

    def choices_from_code(self) -> list[str]:
        from durable_workflow import namespaces
        from durable_workflow.models import WorkflowSchedule

        # order_by(): the default ordering would put schedule_id into the DISTINCT.
        used = WorkflowSchedule.objects.order_by().values_list("namespace", flat=True).distinct()
        return [namespaces.default(), *used]


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


class ArchivedFilter(admin.SimpleListFilter):
    """Archived runs are left out of the list unless ``?archived=yes`` (only them) or
    ``?archived=all`` asks for them."""

    title = "archived"
    parameter_name = "archived"
    #: The lookup (a model field path) holding the run's ``archived_at``.
    field = "archived_at"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Archived only"), ("all", "Archived or not")]

    def choices(self, changelist: Any) -> Any:
        # Django's first choice (no parameter) is "All"; here it means "not archived".
        for index, choice in enumerate(super().choices(changelist)):
            yield {**choice, "display": "Not archived"} if index == 0 else choice

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "all":
            return queryset
        if value == "yes":
            return queryset.filter(**{f"{self.field}__isnull": False})
        return queryset.filter(**{f"{self.field}__isnull": True})


class CurrentRunArchivedFilter(ArchivedFilter):
    """Instances whose newest run is archived are left out the same way."""

    field = "current_run__archived_at"
