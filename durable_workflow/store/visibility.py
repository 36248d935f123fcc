"""Search-attribute rows and the run list queries built on them."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from django.db.models import F, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from durable_workflow.models import SearchAttribute, WorkflowRun


def _typed(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"value_bool": value}
    if isinstance(value, int | float):
        return {"value_number": float(value)}
    return {"value_string": str(value)}


def replace_attributes(run_id: uuid.UUID, attributes: dict[str, Any]) -> None:
    """Make the typed rows mirror ``attributes`` exactly."""
    SearchAttribute.objects.filter(run_id=run_id).exclude(key__in=list(attributes)).delete()
    existing = set(SearchAttribute.objects.filter(run_id=run_id).values_list("key", flat=True))
    for key, value in attributes.items():
        fields = {"value_string": None, "value_number": None, "value_bool": None, **_typed(value)}
        if key in existing:
            SearchAttribute.objects.filter(run_id=run_id, key=key).update(**fields)
        else:
            SearchAttribute.objects.create(run_id=run_id, key=key, **fields)


def update_run_visibility(run_id: uuid.UUID, **fields: Any) -> None:
    WorkflowRun.objects.filter(id=run_id).update(**fields)


def current_visibility(run_id: uuid.UUID) -> tuple[dict[str, Any], dict[str, Any]]:
    memo, attributes = (
        WorkflowRun.objects.filter(id=run_id).values_list("memo", "search_attributes").get()
    )
    return dict(memo or {}), dict(attributes or {})


def _with_labels(rows: QuerySet[WorkflowRun], labels: dict[str, str]) -> QuerySet[WorkflowRun]:
    """Runs carrying every label with that value; each key is taken whole (one holding
    '__' is not a lookup path)."""
    for number, (key, value) in enumerate(labels.items()):
        alias = f"label_{number}"
        rows = rows.alias(**{alias: KeyTransform(key, "labels")}).filter(**{alias: value})
    return rows


_LOOKUPS = {"exact", "gt", "gte", "lt", "lte", "in", "startswith", "contains"}


def _attribute_filter(key: str, lookup: str, value: Any) -> Q:
    if lookup not in _LOOKUPS:
        raise ValueError(f"unsupported search attribute lookup {lookup!r}")
    sample = value[0] if lookup == "in" and value else value
    column = next(iter(_typed(sample)))
    if lookup == "in":
        values = [next(iter(_typed(v).values())) for v in value]
        return Q(key=key, **{f"{column}__in": values})
    typed = next(iter(_typed(value).values()))
    return Q(key=key, **{f"{column}__{lookup}": typed})


def filter_runs(
    columns: Sequence[str],
    /,
    *,
    workflow_type: str | None = None,
    status: str | list[str] | None = None,
    business_key: str | None = None,
    instance_id: str | None = None,
    namespace: str | None = None,
    search_attributes: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    started_after: dt.datetime | None = None,
    started_before: dt.datetime | None = None,
    closed_after: dt.datetime | None = None,
    closed_before: dt.datetime | None = None,
    current_only: bool = False,
    archived: bool | None = False,
    limit: int = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Runs matching every filter, newest first, as dicts of ``columns`` (one query plus one per
    search-attribute filter, each an indexed sub-select). ``archived``: ``False`` (the
    default) leaves archived runs out, ``True`` keeps only them, ``None`` keeps both."""
    rows = WorkflowRun.objects.all()
    if workflow_type:
        rows = rows.filter(workflow_type=workflow_type)
    if status:
        rows = rows.filter(status__in=[status] if isinstance(status, str) else status)
    if business_key:
        rows = rows.filter(business_key=business_key)
    if instance_id:
        rows = rows.filter(instance_id=instance_id)
    if namespace:
        rows = rows.filter(namespace=namespace)
    if archived is not None:
        rows = rows.filter(archived_at__isnull=not archived)
    for name, bound in (
        ("started_at__gte", started_after),
        ("started_at__lt", started_before),
        ("closed_at__gte", closed_after),
        ("closed_at__lt", closed_before),
    ):
        if bound is not None:
            rows = rows.filter(**{name: bound})
    for spec, value in (search_attributes or {}).items():
        key, _, lookup = spec.partition("__")
        matching = SearchAttribute.objects.filter(
            _attribute_filter(key, lookup or "exact", value)
        ).values("run_id")
        rows = rows.filter(id__in=matching)
    rows = _with_labels(rows, labels or {})
    if current_only:
        rows = rows.filter(instance__current_run_id=F("id"))
    return list(rows.order_by("-started_at", "-id").values(*columns)[offset : offset + limit])
