"""Instances: the list, the instance page (its runs) and operator actions on its current run."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html_join

from durable_workflow.admin.actions import OPERATOR_ACTIONS, OperatorActionsMixin
from durable_workflow.admin.base import EngineAdmin, timeline_url
from durable_workflow.admin.filters import (
    CurrentRunArchivedFilter,
    NamespaceFilter,
    WorkflowTypeFilter,
)
from durable_workflow.admin.runs import allowed_operations, run_link
from durable_workflow.admin.targets import Target
from durable_workflow.models import WorkflowInstance, WorkflowRun


@admin.register(WorkflowInstance)
class WorkflowInstanceAdmin(OperatorActionsMixin, EngineAdmin):
    list_display = (
        "instance_id",
        "namespace",
        "workflow_type",
        "status",
        "business_key",
        "run_count",
        "currentrun_link",
        "created_at",
        "updated_at",
    )
    list_filter = (
        CurrentRunArchivedFilter,
        NamespaceFilter,
        "status",
        WorkflowTypeFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=instance_id", "^instance_id", "=business_key")
    search_help_text = "Instance id (exact or prefix) or business key."
    actions = OPERATOR_ACTIONS
    ordering = ("-created_at",)
    change_form_template = "durable_workflow/admin/run_change_form.html"
    readonly_fields = ("currentrun_link", "runs")

    @admin.display(description="current run")
    def currentrun_link(self, instance: WorkflowInstance) -> str:
        if instance.current_run_id is None:
            return "-"
        return run_link(instance.current_run_id, "current run")

    @admin.display(description="runs")
    def runs(self, instance: WorkflowInstance) -> str:
        rows = (
            WorkflowRun.objects.filter(
                namespace=instance.namespace, instance_id=instance.instance_id
            )
            .order_by("-run_number")
            .values_list("pk", "run_number", "status")[:50]
        )
        return (
            format_html_join(
                "",
                "<div>{}</div>",
                ((run_link(pk, f"#{number} {status}"),) for pk, number, status in rows),
            )
            or "-"
        )

    def target_of(self, instance: WorkflowInstance) -> Target:
        return Target(instance.instance_id, None, instance.namespace)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        instance = WorkflowInstance.objects.filter(key=object_id).first()
        current = instance.runs.order_by("-run_number").first() if instance is not None else None
        extra = dict(extra_context or {})
        if current is not None:
            extra["timeline_url"] = timeline_url(current.pk)
            extra["operations"] = [
                {
                    **op,
                    "url": reverse(
                        "admin:durable_workflow_workflowinstance_operate",
                        args=[object_id, op["kind"]],
                    ),
                }
                for op in allowed_operations(request, current.pk, run=current)
            ]
        return super().change_view(request, object_id, form_url, extra)

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<path:object_id>/operate/<str:kind>/",
                self.admin_site.admin_view(self.operate_view),
                name="durable_workflow_workflowinstance_operate",
            ),
            *super().get_urls(),
        ]
