"""Finding runs: by type, status, business key, labels, time range and search attributes.

    from durable_workflow.visibility import list_runs

    list_runs(workflow_type="order-processing", status="waiting",
              search_attributes={"customer": "acme", "priority__gte": 3},
              labels={"tenant": "acme"})
    list_runs(workflow_type="order-processing", archived=True)  # archived runs only

Search-attribute filters take ``key`` (equality) or ``key__<lookup>`` with
``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``startswith`` or ``contains``. They
run against typed, indexed rows, so they work the same on PostgreSQL and SQLite.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from durable_workflow import namespaces
from durable_workflow.authoring.visibility import check_labels
from durable_workflow.client_async import call
from durable_workflow.exceptions import InvalidValueError
from durable_workflow.store.visibility import filter_runs


@dataclasses.dataclass(frozen=True)
class RunSummary:
    run_id: str
    instance_id: str
    run_number: int
    workflow_type: str
    status: str
    closed_reason: str | None
    business_key: str | None
    labels: dict[str, Any]
    memo: dict[str, Any]
    search_attributes: dict[str, Any]
    started_at: dt.datetime | None
    closed_at: dt.datetime | None
    archived_at: dt.datetime | None = None
    namespace: str = "default"


#: The columns a summary is read from: its fields, ``run_id`` being the row's ``id``.
_SUMMARY_COLUMNS = tuple(
    "id" if field.name == "run_id" else field.name for field in dataclasses.fields(RunSummary)
)


def list_runs(**filters: Any) -> list[RunSummary]:
    """Runs matching every given filter, newest first (``limit``/``offset`` page them).

    ``labels={"tenant": "acme"}`` keeps runs carrying every given label with that value.
    Archived runs are left out unless asked for: ``archived=True`` lists only them,
    ``archived=None`` lists runs whether archived or not. ``namespace="billing"`` keeps
    that namespace's runs; without it, runs of every namespace are listed.
    """
    if filters.get("namespace") is not None:
        filters["namespace"] = namespaces.check(filters["namespace"])
    if "labels" in filters:
        filters["labels"] = check_labels(filters["labels"])
    if filters.get("archived", False) not in (True, False, None):
        raise InvalidValueError("archived must be True, False or None", field="archived")
    rows = filter_runs(_SUMMARY_COLUMNS, **filters)
    return [RunSummary(run_id=str(row.pop("id")), **row) for row in rows]


async def alist_runs(**filters: Any) -> list[RunSummary]:
    """``list_runs()`` as a coroutine (for async views)."""
    return await call(list_runs, **filters)
