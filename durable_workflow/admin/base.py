"""What every engine admin page shares: read-only, capped counts, operator permissions.

The engine's tables are written only by the executor. The admin therefore
never adds, edits or deletes rows; operator actions go through the same
commands as the client. Permissions:

* viewing a page: the model's ``view_*`` permission (or ``change_*``);
* cancel, signal, repair, retry a failed workflow task:
  ``durable_workflow.change_workflowrun``;
* terminate: ``durable_workflow.delete_workflowrun``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from durable_workflow.admin.payloads import decoding_for

OPERATE_PERMISSION = "durable_workflow.change_workflowrun"
TERMINATE_PERMISSION = "durable_workflow.delete_workflowrun"
COUNT_CAP = 10_000

# Django's admin and paginator classes are generic to the type checker only.
if TYPE_CHECKING:
    _Paginator = Paginator[Any]
    _ModelAdmin = admin.ModelAdmin[Any]  # one base for every engine table
else:
    _Paginator = Paginator
    _ModelAdmin = admin.ModelAdmin


class CappedCountPaginator(_Paginator):
    """Counts at most ``COUNT_CAP + 1`` rows: a list over a million rows stays fast."""

    @cached_property
    def count(self) -> int:
        # The admin's changelists hand their paginator a queryset.
        rows = cast("QuerySet[Any]", self.object_list)
        return int(rows[: COUNT_CAP + 1].count())


def rendered_for(
    request: HttpRequest, view: Callable[..., HttpResponse], *args: Any, **kwargs: Any
) -> HttpResponse:
    """Run and render ``view`` with payloads shown as ``request``'s user may see them."""
    with decoding_for(request):
        response = view(*args, **kwargs)
        if isinstance(response, TemplateResponse) and not response.is_rendered:
            response.render()
    return response


def can_operate(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(OPERATE_PERMISSION))


def can_terminate(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(TERMINATE_PERMISSION))


class EngineAdmin(_ModelAdmin):
    """A read-only view of one engine table."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50
    # Newest first along the primary key (time-ordered UUIDs or an auto id): an index
    # scan, where the models' orderings through foreign keys would sort the whole table.
    ordering = ("-pk",)

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        declared = list(super().get_readonly_fields(request, obj))
        hidden = set(self.exclude or ()) | set(declared)
        return declared + [f.name for f in self.model._meta.fields if f.name not in hidden]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return rendered_for(request, super().changeform_view, request, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return rendered_for(request, super().changelist_view, request, *args, **kwargs)

    # Custom permissions for ``@admin.action(permissions=[...])``.
    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        return can_terminate(request)


def admin_url(model: type[Model] | Model, pk: Any, view: str = "change") -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=[pk])


def link(model: type[Model], pk: Any, text: Any = None) -> str:
    if pk is None:
        return "-"
    return format_html('<a href="{}">{}</a>', admin_url(model, pk), text if text else pk)


def timeline_url(run_id: Any) -> str:
    return reverse("admin:durable_workflow_workflowrun_timeline", args=[run_id])


def id_search(term: str, *, run_field: str = "run_id", instance_field: str | None = None) -> Q:
    """Match a run id (a UUID) or an instance id exactly."""
    query = Q()
    with contextlib.suppress(ValueError):
        query |= Q(**{run_field: uuid.UUID(term)})
    if instance_field:
        query |= Q(**{instance_field: term})
    return query


class IdSearchMixin:
    """``get_search_results`` that also matches run and instance ids exactly."""

    run_field = "run_id"
    instance_field: str | None = "run__instance_id"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        results, duplicates = super().get_search_results(  # type: ignore[misc]
            request, queryset, search_term
        )
        extra = id_search(term, run_field=self.run_field, instance_field=self.instance_field)
        if extra:
            results = results | queryset.filter(extra)
        return results, duplicates
