"""The runs list as a triage tool: attention badges, what each run waits on, the
"needs attention" filter, label and search-attribute search."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from durable_workflow.admin.base import timeline_url
from durable_workflow.admin.triage import Triage, triage
from durable_workflow.models import SearchAttribute, WorkflowFailure, WorkflowRun
from durable_workflow.operations.attention import KINDS, runs_needing

#: The longest label key or value a search may name.
MAX_LABEL_TEXT = 255

# The type django-stubs gives ModelAdmin.list_display, so the mixin combines with it.
_Column = str | Callable[[Any], str | bool]
_ColumnList = list[_Column] | tuple[_Column, ...]


class NeedsAttentionFilter(admin.SimpleListFilter):
    """``?attention=any`` or one kind: open runs an operator should look at."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("any", "Any reason"), *((key, kind.label) for key, kind in KINDS.items())]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if value != "any" and value not in KINDS:
            return queryset.none()  # a hand-typed unknown kind matches nothing
        return queryset.filter(pk__in=runs_needing(value).values("pk"))


class TriageChangeList(ChangeList):
    """Reads the triage of the page's runs in one batch after the page is fetched."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        page = list(self.result_list)
        found = triage(page)
        for run in page:
            run.dw_triage = found.get(run.pk, Triage())


def _triage_of(run: WorkflowRun) -> Triage:
    return getattr(run, "dw_triage", None) or triage([run])[run.pk]


def _short(moment: dt.datetime) -> str:
    """``12-03 14:05:09`` in the site's time zone."""
    local = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    return local.strftime("%m-%d %H:%M:%S")


def _failed_with(name: str) -> QuerySet[Any]:
    """Ids of runs with a recorded failure (of a task or of the run) of this exception
    type, by its short name (``NonDeterminismError``) or its full one."""
    name = name.strip()[:MAX_LABEL_TEXT]
    if not name:
        return WorkflowRun.objects.none().values("pk")
    rows = WorkflowFailure.objects.filter(
        Q(exception_type=name)
        | Q(exception_type__endswith=f".{name}")
        | Q(exception_class=name)
        | Q(exception_class__endswith=f".{name}")
    )
    return rows.values("run_id")


def label_search(term: str) -> tuple[str, str] | None:
    """``label:key=value`` as (key, value), or None when the term is not one."""
    if not term.startswith("label:"):
        return None
    key, equals, value = term[len("label:") :].partition("=")
    key, value = key.strip(), value.strip()
    if not equals or not key or len(key) > MAX_LABEL_TEXT or len(value) > MAX_LABEL_TEXT:
        return None
    return key, value


class RunListMixin:
    """Columns and search of the runs list (``WorkflowRunAdmin``)."""

    list_display: _ColumnList = (
        "run_column",
        "workflow_type",
        "state_column",
        "waiting_on_column",
        "when_column",
    )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return TriageChangeList

    @admin.display(description="run", ordering="instance_id")
    def run_column(self, run: WorkflowRun) -> str:
        return format_html(
            '<a href="{}">{}</a> <span class="dw-run-number">#{}</span>',
            timeline_url(run.pk),
            run.instance_id,
            run.run_number,
        )

    @admin.display(description="status", ordering="status")
    def state_column(self, run: WorkflowRun) -> str:
        reason = run.closed_reason if run.closed_reason not in (None, "", run.status) else None
        status = run.status + (f" ({reason})" if reason else "")
        badges = format_html_join(
            " ",
            '<span class="dw-badge dw-badge-{}" title="{}">{}</span>',
            ((key, label, badge) for key, badge, label in _triage_of(run).badges),
        )
        return format_html("{} {}", status, badges)

    @admin.display(description="started / closed", ordering="created_at")
    def when_column(self, run: WorkflowRun) -> str:
        return format_html(
            '<span class="dw-when">{}<br>{}</span>',
            _short(run.started_at or run.created_at),
            _short(run.closed_at) if run.closed_at else "open",
        )

    @admin.display(description="waiting on")
    def waiting_on_column(self, run: WorkflowRun) -> str:
        return _triage_of(run).waiting_on or "-"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        if term.startswith("failed:"):
            return queryset.filter(pk__in=_failed_with(term[len("failed:") :])), False
        label = label_search(term)
        if label is not None:
            key, value = label
            labelled = queryset.annotate(dw_label=KeyTransform(key, "labels"))
            return queryset.filter(pk__in=labelled.filter(dw_label=value).values("pk")), False
        query = Q(instance_id=term) | Q(instance_id__startswith=term)
        query |= Q(business_key=term)
        with contextlib.suppress(ValueError):
            query |= Q(pk=uuid.UUID(term))
        key, equals, value = term.partition("=")
        if equals and key.strip():
            typed = SearchAttribute.objects.filter(key=key.strip(), value_string=value.strip())
            query |= Q(pk__in=typed.values("run_id"))
        attributes = queryset.annotate(_attrs=Cast("search_attributes", TextField()))
        found = attributes.filter(query | Q(_attrs__icontains=term)).values("pk")
        return queryset.filter(pk__in=found), False
