"""Instances and runs: lists, search, the timeline page and operator actions."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import content_disposition_header

from durable_workflow.admin import dashboard, run_page, timeline
from durable_workflow.admin.actions import OPERATOR_ACTIONS, OperatorActionsMixin
from durable_workflow.admin.base import (
    EngineAdmin,
    admin_url,
    link,
    rendered_for,
    timeline_url,
)
from durable_workflow.admin.compatibility import compatibility_html
from durable_workflow.admin.filters import (
    ArchivedFilter,
    ClosedReasonFilter,
    NamespaceFilter,
    QueueFilter,
    WorkflowTypeFilter,
)
from durable_workflow.admin.operations import (
    ON_CLOSED_RUNS,
    ONLY_ON_CLOSED_RUNS,
    OPERATIONS,
)
from durable_workflow.admin.payloads import duration, pre
from durable_workflow.admin.run_list import NeedsAttentionFilter, RunListMixin
from durable_workflow.admin.targets import Target
from durable_workflow.admin.triage import triage
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ChildCall,
    Task,
    TaskStatus,
    WorkflowFailure,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.namespaces import instance_key


@admin.register(WorkflowRun)
class WorkflowRunAdmin(RunListMixin, OperatorActionsMixin, EngineAdmin):
    list_filter = (
        ArchivedFilter,
        NeedsAttentionFilter,
        NamespaceFilter,
        "status",
        WorkflowTypeFilter,
        QueueFilter,
        ClosedReasonFilter,
        ("created_at", admin.DateFieldListFilter),
        ("closed_at", admin.DateFieldListFilter),
    )
    search_fields = ("=instance__instance_id",)
    search_help_text = (
        "Instance id (exact or prefix), run id, business key, key=value of a search "
        "attribute, label:key=value, failed:ExceptionType, or text in search attributes."
    )
    actions = OPERATOR_ACTIONS
    ordering = ("-created_at",)
    change_form_template = "durable_workflow/admin/run_change_form.html"
    change_list_template = "durable_workflow/admin/run_change_list.html"
    readonly_fields = (
        "instance_link",
        "arguments_display",
        "output_display",
        "lineage",
        "compatibility_display",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "instance_link",
                    "id",
                    "run_number",
                    "workflow_type",
                    "workflow_class",
                    "status",
                    "closed_reason",
                    "queue",
                    "connection",
                    "payload_codec",
                    "business_key",
                    "compatibility_display",
                )
            },
        ),
        ("Payloads", {"fields": ("arguments_display", "output_display")}),
        ("Lineage", {"fields": ("lineage",)}),
        (
            "Timing",
            {
                "fields": (
                    "created_at",
                    "started_at",
                    "last_progress_at",
                    "closed_at",
                    "archived_at",
                    "cancel_requested_at",
                    "execution_timeout_seconds",
                    "run_timeout_seconds",
                    "execution_deadline_at",
                    "run_deadline_at",
                )
            },
        ),
        (
            "History",
            {"fields": ("next_sequence", "workflow_task_sequence", "history_size_bytes")},
        ),
        ("Visibility", {"fields": ("labels", "memo", "search_attributes")}),
    )

    # ------------------------------------------------------------------ columns
    @admin.display(description="instance", ordering="instance_id")
    def instance_link(self, run: WorkflowRun) -> str:
        return link(WorkflowInstance, instance_key(run.namespace, run.instance_id), run.instance_id)

    @admin.display(description="events")
    def events(self, run: WorkflowRun) -> int:
        return run.history_event_count

    @admin.display(description="timeline")
    def timeline_link(self, run: WorkflowRun) -> str:
        return format_html('<a href="{}">timeline</a>', timeline_url(run.pk))

    @admin.display(description="arguments")
    def arguments_display(self, run: WorkflowRun) -> str:
        return pre(run.arguments)

    @admin.display(description="output")
    def output_display(self, run: WorkflowRun) -> str:
        return pre(run.output) if run.output is not None else "-"

    @admin.display(description="compatibility marker")
    def compatibility_display(self, run: WorkflowRun) -> str:
        return compatibility_html(run)

    @admin.display(description="parents, children, continue-as-new, reset and fork")
    def lineage(self, run: WorkflowRun) -> str:
        return (
            format_html_join(
                "", "<div>{}: {}</div>", ((label, value) for label, value in lineage_links(run))
            )
            or "-"
        )

    # --------------------------------------------------------------- operations
    def target_of(self, run: WorkflowRun) -> Target:
        return Target(run.instance_id, run.pk, run.namespace)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name="durable_workflow_dashboard"),
            path(
                "<path:object_id>/timeline/",
                wrap(self.timeline_view),
                name="durable_workflow_workflowrun_timeline",
            ),
            path(
                "<path:object_id>/operate/<str:kind>/",
                wrap(self.operate_view),
                name="durable_workflow_workflowrun_operate",
            ),
            path(
                "<path:object_id>/export/",
                wrap(self.export_view),
                name="durable_workflow_workflowrun_export",
            ),
            *super().get_urls(),
        ]

    def after_operation_url(self, run: Any) -> str:
        return timeline_url(run.pk)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = _run_or_none(object_id)
        if run is None:  # Django's own page says the run does not exist
            return super().change_view(request, object_id, form_url, extra_context)
        extra = {**(extra_context or {}), "operations": allowed_operations(request, run, run=run)}
        extra["timeline_url"] = timeline_url(run.pk)
        extra["export_url"] = reverse("admin:durable_workflow_workflowrun_export", args=[run.pk])
        extra.update(run_page.page_context(run))
        extra["waiting_on"] = triage([run])[run.pk]
        return super().change_view(request, object_id, form_url, extra)

    def export_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The run's history export bundle (what workflow_history_export writes), to
        keep as an archive or to replay elsewhere with workflow_replay."""
        run = _run_or_none(object_id)
        if run is None:
            raise Http404("no such run")
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        from durable_workflow.ids import instance_file_name
        from durable_workflow.operations.export import build_bundle

        bundle = build_bundle(run.instance_id, run_id=str(run.pk), namespace=run.namespace)
        response = JsonResponse(bundle, json_dumps_params={"indent": 2, "ensure_ascii": False})
        name = f"{instance_file_name(run.instance_id)}-run-{run.run_number}.json"
        response["Content-Disposition"] = content_disposition_header(True, name)
        return response

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            **dashboard.context(),
            "opts": self.model._meta,
            "title": "Durable workflow dashboard",
        }
        return TemplateResponse(request, "durable_workflow/admin/dashboard.html", context)

    def timeline_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return rendered_for(request, self._timeline, request, object_id)

    def _timeline(self, request: HttpRequest, object_id: str) -> HttpResponse:
        try:
            run = WorkflowRun.objects.select_related(
                "instance", "parent_run", "continued_from"
            ).get(pk=uuid.UUID(object_id))
        except (ValueError, WorkflowRun.DoesNotExist):
            raise Http404("no such run") from None
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        last_moment = run.closed_at or run.last_progress_at
        page = timeline.build_page(
            run,
            after=_int(request.GET.get("after")),
            before=_int(request.GET.get("before")),
            event_type=request.GET.get("event_type") or None,
            size=_int(request.GET.get("size")) or timeline.PAGE_SIZE,
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Run {run.run_number} of {run.instance_id}",
            "run": run,
            "page": page,
            "instance_url": admin_url(
                WorkflowInstance, instance_key(run.namespace, run.instance_id)
            ),
            "run_url": admin_url(WorkflowRun, run.pk),
            "export_url": reverse("admin:durable_workflow_workflowrun_export", args=[run.pk]),
            "lineage": lineage_links(run),
            "failures": list(
                WorkflowFailure.objects.filter(run_id=run.pk).order_by("-created_at")[:10]
            ),
            "open_tasks": list(
                Task.objects.filter(
                    run_id=run.pk, status__in=(TaskStatus.READY, TaskStatus.LEASED)
                ).order_by("created_at")[:20]
            ),
            "duration": duration(
                (last_moment - run.started_at).total_seconds()
                if run.started_at and last_moment
                else None
            ),
            "arguments": pre(run.arguments),
            "output": pre(run.output) if run.output is not None else None,
            "operations": allowed_operations(request, run, run=run),
            "compatibility": compatibility_html(run),
            "waiting_on": triage([run])[run.pk],
            **run_page.page_context(run),
            "event_types": sorted(str(e) for e in timeline_event_types()),
        }
        return TemplateResponse(request, "durable_workflow/admin/run_timeline.html", context)


def _run_or_none(object_id: str) -> WorkflowRun | None:
    try:
        return WorkflowRun.objects.filter(pk=uuid.UUID(str(object_id))).first()
    except ValueError:
        return None


def timeline_event_types() -> list[str]:
    from durable_workflow.engine.events import EventType

    return [str(e) for e in EventType]


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def allowed_operations(
    request: HttpRequest, object_id: Any, *, run: WorkflowRun | None = None
) -> list[dict[str, str]]:
    """Buttons for the run page: the operations this user may start on this run."""
    if run is None:
        run = WorkflowRun.objects.filter(pk=object_id).only("status", "archived_at").first()
    if run is None:
        return []
    allowed = []
    for kind, operation in OPERATIONS.items():
        permitted = request.user.has_perm(operation.permission)
        closed = run.status in TERMINAL_RUN_STATUSES
        if not permitted or (closed and kind not in ON_CLOSED_RUNS):
            continue
        if kind in ONLY_ON_CLOSED_RUNS and (not closed or run.archived_at is not None):
            continue
        allowed.append(
            {
                "kind": kind,
                "label": operation.label,
                "url": reverse("admin:durable_workflow_workflowrun_operate", args=[run.pk, kind]),
            }
        )
    return allowed


def lineage_links(run: WorkflowRun) -> list[tuple[str, str]]:
    """(label, html) pairs: parent, continued-from, continued-as, children (3 queries)."""
    links: list[tuple[str, str]] = []
    if run.parent_run_id:
        links.append(("parent run", run_link(run.parent_run_id, str(run.parent_run))))
    if run.continued_from_id:
        links.append(("continued from", run_link(run.continued_from_id, str(run.continued_from))))
    for pk, instance_id, number in WorkflowRun.objects.filter(continued_from_id=run.pk).values_list(
        "pk", "instance_id", "run_number"
    )[:10]:
        links.append(("continued as", run_link(pk, f"{instance_id} #{number}")))
    links += _rewind_links(run)
    for call in ChildCall.objects.filter(parent_run_id=run.pk).order_by("sequence")[:50]:
        label = f"child (step {call.sequence}, {call.status})"
        if call.child_run_id:
            links.append((label, run_link(call.child_run_id, call.child_instance_id)))
        else:
            links.append((label, call.child_instance_id))
    return links


def _rewind_links(run: WorkflowRun) -> list[tuple[str, str]]:
    """Reset and fork lineage: the run this one was reset or forked from (and the
    point), the run a reset of it started, and its forks."""
    links: list[tuple[str, str]] = []
    point = run.reset_point or {}
    where = f" ({point.get('kind')}, cut before event {point.get('cut')})" if point else ""
    source = run.reset_from_run
    if source is not None:
        same = (source.namespace, source.instance_id) == (run.namespace, run.instance_id)
        label = "reset from" if same else "forked from"
        links.append((label + where, run_link(source.pk, str(source))))
    if run.reset_to_run_id:
        links.append(("reset to" + where, run_link(run.reset_to_run_id, str(run.reset_to_run))))
    forks = WorkflowRun.objects.filter(reset_from_run_id=run.pk).exclude(
        instance_id=run.instance_id
    )
    for pk, instance_id, number in forks.values_list("pk", "instance_id", "run_number")[:10]:
        links.append(("forked as", run_link(pk, f"{instance_id} #{number}")))
    return links


def run_link(pk: Any, text: str) -> str:
    return format_html(
        '<a href="{}">{}</a> (<a href="{}">timeline</a>)',
        admin_url(WorkflowRun, pk),
        text,
        timeline_url(pk),
    )
