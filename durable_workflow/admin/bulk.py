"""The bulk jobs' pages: a list, and a progress page per job with a cancel button.

Seeing a job takes ``view_bulkjob`` or the operate permission (the operators who
start them); cancelling one takes the permission of its operation.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from durable_workflow.admin.base import OPERATE_PERMISSION, EngineAdmin
from durable_workflow.admin.operations import OPERATIONS
from durable_workflow.models import BulkItemState, BulkJob, BulkJobItem
from durable_workflow.operations import bulk

#: Items shown per page of a job's outcomes.
ITEMS_PER_PAGE = 100
#: Seconds between refreshes of an open job's page.
REFRESH_SECONDS = 3


@admin.register(BulkJob)
class BulkJobAdmin(EngineAdmin):
    list_display = ("id", "operation", "status", "progress", "operator", "created_at")
    list_filter = ("status", "operation")

    @admin.display(description="Progress")
    def progress(self, obj: BulkJob) -> str:
        return f"{obj.processed}/{obj.total}"

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or request.user.has_perm(
            OPERATE_PERMISSION
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def get_urls(self) -> list[URLPattern]:
        cancel = path(
            "<path:object_id>/cancel/",
            self.admin_site.admin_view(self.cancel_view),
            name="durable_workflow_bulkjob_cancel",
        )
        return [cancel, *super().get_urls()]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        job = self.get_object(request, object_id)
        if job is None or not self.has_view_permission(request, job):
            raise PermissionDenied
        state = request.GET.get("state", "")
        items = BulkJobItem.objects.filter(job=job).order_by("id")
        if state in BulkItemState.values:
            items = items.filter(state=state)
        page = Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
        percent = 100 if not job.total else int(100 * job.processed / job.total)
        stalled = bulk.stalled().filter(pk=job.pk).exists()
        operation = OPERATIONS.get(job.operation)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Bulk job: {job}",
            "opts": self.model._meta,
            "job": job,
            "operation_label": operation.label if operation else job.operation,
            "percent": percent,
            "page": page,
            "state": state,
            "states": BulkItemState.values,
            "open": job.status in bulk.OPEN_STATUSES,
            "stalled": stalled,
            "stalled_after": int(bulk.stalled_after()),
            "refresh": REFRESH_SECONDS,
            "can_cancel": operation is not None
            and request.user.has_perm(operation.permission)
            and job.status in bulk.OPEN_STATUSES,
            "cancel_url": reverse("admin:durable_workflow_bulkjob_cancel", args=[job.pk]),
        }
        return TemplateResponse(request, "durable_workflow/admin/bulk_job.html", context)

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            raise PermissionDenied
        job = self.get_object(request, object_id)
        if job is None or not self.has_view_permission(request, job):
            raise PermissionDenied
        operation = OPERATIONS.get(job.operation)
        if operation is None or not request.user.has_perm(operation.permission):
            raise PermissionDenied
        if bulk.cancel(job.pk):
            messages.success(request, "Bulk job cancelled: no batch starts after this one.")
        else:
            messages.warning(request, f"The bulk job had already ended ({job.status}).")
        return HttpResponseRedirect(reverse("admin:durable_workflow_bulkjob_change", args=[job.pk]))
