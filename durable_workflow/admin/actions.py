"""Admin glue for operator commands: changelist actions, single-run forms, messages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from durable_workflow.admin.base import TERMINATE_PERMISSION
from durable_workflow.admin.operations import (
    OPERATIONS,
    SINGLE_RUN_ONLY,
    form_for,
    perform,
    preview,
)
from durable_workflow.admin.targets import Outcome, Target
from durable_workflow.operations import bulk


def as_job(kind: str, count: int) -> bool:
    """Whether this action over ``count`` runs is a bulk job rather than done inline."""
    return kind in bulk.BULK_OPERATIONS and count > bulk.inline_max()


#: How many targets the confirmation page lists by name.
SHOWN_TARGETS = 50


class OperatorActionsMixin:
    """For run and instance admins: ``target_of(obj)`` says which run a row means."""

    operation_kinds = (
        "cancel",
        "terminate",
        "repair",
        "retry",
        "signal",
        "query",
        "update",
        "reset",
        "fork",
        "archive",
    )

    def target_of(self, obj: Any) -> Target:
        raise NotImplementedError

    def workflow_type_of(self, obj: Any) -> str:
        return str(obj.workflow_type)

    # --------------------------------------------------------------- confirmation
    def render_operation(
        self,
        request: HttpRequest,
        kind: str,
        objects: list[Any],
        form: Any,
        *,
        changelist_action: str | None,
        previews: list[Outcome] | None = None,
    ) -> TemplateResponse:
        opts = self.model._meta  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request),  # type: ignore[attr-defined]
            "title": f"{OPERATIONS[kind].label}: {len(objects)} {opts.verbose_name_plural}",
            "opts": opts,
            "operation": OPERATIONS[kind],
            "form": form,
            "targets": [self.target_of(o) for o in objects[:SHOWN_TARGETS]],
            "more": max(0, len(objects) - SHOWN_TARGETS),
            "selected": [o.pk for o in objects],
            "changelist_action": changelist_action,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "previews": previews,
            "dry_run_available": True,
            "preview_summary": _summary(previews) if previews is not None else "",
        }
        return TemplateResponse(request, "durable_workflow/admin/operate.html", context)

    def run_operation(
        self, request: HttpRequest, kind: str, objects: Iterable[Any], data: dict[str, Any]
    ) -> list[Outcome]:
        outcomes = []
        for obj in objects:
            outcome = perform(kind, self.target_of(obj), data, request)
            outcomes.append(outcome)
            message = f"{OPERATIONS[kind].label}: {outcome.outcome}. Reason: {data['reason']}"
            self.log_change(request, obj, message)  # type: ignore[attr-defined]
        report(request, kind, outcomes)
        return outcomes

    def changelist_operation(
        self, kind: str, request: HttpRequest, queryset: QuerySet[Any]
    ) -> HttpResponse | None:
        objects = list(queryset)
        types = {self.workflow_type_of(o) for o in objects}
        previews = None
        if "apply" in request.POST:
            form = form_for(kind, request.POST, workflow_types=types)
            if form.is_valid() and "dry_run" in request.POST:
                previews = [preview(kind, self.target_of(o), form.cleaned_data) for o in objects]
            elif form.is_valid() and as_job(kind, len(objects)):
                return self.start_bulk_job(request, kind, objects, form.cleaned_data)
            elif form.is_valid():
                self.run_operation(request, kind, objects, form.cleaned_data)
                return None
        else:
            form = form_for(kind, workflow_types=types)
        response = self.render_operation(
            request, kind, objects, form, changelist_action=f"{kind}_selected", previews=previews
        )
        if as_job(kind, len(objects)):
            response.context_data["bulk_job"] = {  # type: ignore[index]
                "threshold": bulk.inline_max(),
                "batch_size": bulk.batch_size(),
            }
        return response

    def start_bulk_job(
        self, request: HttpRequest, kind: str, objects: list[Any], data: dict[str, Any]
    ) -> HttpResponse:
        """More runs than ``BULK_INLINE_MAX_RUNS``: a bulk job a Celery worker processes
        in batches; the operator is sent to its progress page."""
        targets = [self.target_of(o) for o in objects]
        filters = request.GET.urlencode()
        job = bulk.create_job(
            kind,
            ((t.instance_id, t.run_id) for t in targets),
            reason=data["reason"],
            operator=request.user.get_username(),
            filter=filters or "(selected rows)",
            options=data,
        )
        bulk.enqueue(job)
        url = reverse("admin:durable_workflow_bulkjob_change", args=[job.pk])
        messages.success(
            request,
            format_html(
                '{}: {} runs, in batches of {}: <a href="{}">bulk job progress</a>.',
                OPERATIONS[kind].label,
                job.total,
                job.batch_size,
                url,
            ),
        )
        return HttpResponseRedirect(url)

    def operate_view(self, request: HttpRequest, object_id: str, kind: str) -> HttpResponse:
        """One row's operation form (the buttons on its page)."""
        if kind not in OPERATIONS or kind not in self.operation_kinds:
            raise PermissionDenied
        if not request.user.has_perm(OPERATIONS[kind].permission):
            raise PermissionDenied
        obj = self.get_object(request, object_id)  # type: ignore[attr-defined]
        if obj is None or not self.has_view_permission(request, obj):  # type: ignore[attr-defined]
            raise PermissionDenied
        types = {self.workflow_type_of(obj)}
        previews = None
        if request.method == "POST":
            form = form_for(kind, request.POST, workflow_types=types)
            if form.is_valid() and "dry_run" in request.POST:
                previews = [preview(kind, self.target_of(obj), form.cleaned_data)]
            elif form.is_valid():
                self.run_operation(request, kind, [obj], form.cleaned_data)
                return HttpResponseRedirect(self.after_operation_url(obj))
        else:
            form = form_for(kind, workflow_types=types)
        return self.render_operation(
            request, kind, [obj], form, changelist_action=None, previews=previews
        )

    def after_operation_url(self, obj: Model) -> str:
        from durable_workflow.admin.base import admin_url

        return admin_url(obj, obj.pk)


def _summary(outcomes: list[Outcome]) -> str:
    counts = Counter(o.outcome for o in outcomes)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def report(request: HttpRequest, kind: str, outcomes: list[Outcome]) -> None:
    label = OPERATIONS[kind].label
    accepted = Counter(o.outcome for o in outcomes if o.accepted)
    if accepted:
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(accepted.items()))
        messages.success(request, f"{label}: {summary}.")
    for outcome in outcomes:
        if outcome.detail:
            messages.info(request, f"{label} of {outcome.target}: {outcome.detail}")
        if not outcome.accepted:
            messages.warning(
                request,
                f"{label} of {outcome.target} rejected: {outcome.outcome}"
                + (f" ({outcome.rejection_reason})" if outcome.rejection_reason else ""),
            )


def make_action(kind: str) -> Callable[..., HttpResponse | None]:
    operation = OPERATIONS[kind]
    permission = "terminate" if operation.permission == TERMINATE_PERMISSION else "operate"

    @admin.action(description=f"{operation.label} selected", permissions=[permission])
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        return modeladmin.changelist_operation(kind, request, queryset)

    action.__name__ = f"{kind}_selected"
    return action


OPERATOR_ACTIONS = [make_action(kind) for kind in OPERATIONS if kind not in SINGLE_RUN_ONLY]
