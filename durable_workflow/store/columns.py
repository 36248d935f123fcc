"""Reads of many rows, converted a column at a time.

A cold replay reads a run's whole history: tens of thousands of rows, where the
per-row conversions of the single-row path cost more than everything else the
engine does with the row. Two of them are worth doing differently for such reads:

* a JSON column is text from the driver (Django registers a text loader for
  ``jsonb``, SQLite stores text); its values are decoded in one ``json.loads`` of
  a JSON array that joins them, not one call per row. One call parses the same
  text with the same decoder, and shares the object keys between rows.
* a time on PostgreSQL, when Django reads times in UTC (``USE_TZ`` and no
  ``TIME_ZONE`` of the database's own), is selected ``AT TIME ZONE 'UTC'``: the
  driver's compiled loader reads it, and the UTC zone is set on it, as Django's
  own loader for ``timestamptz`` (pure Python, ~4 µs a row) sets it.

Every other column goes through the ORM's converters, as in
:meth:`durable_workflow.store.sql.Table.select`. The outcome is what that method
returns, value for value.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections
from django.db.models import DateTimeField, JSONField, Model

#: Converts a whole column (its values, in row order).
Convert = Callable[[Sequence[Any]], list[Any]]
#: The SQL that selects a column, and its :data:`Convert` (``None``: as the driver reads it).
Reader = tuple[str, Convert | None]


def readers(model: type[Model], names: tuple[str, ...], conn: Any) -> list[Reader]:
    """For each named field of ``model``: the SQL that selects it on ``conn`` and how
    to convert its values (``None``: they need nothing)."""
    return _readers(model, names, conn.alias, _utc_postgresql(conn))


@functools.lru_cache(maxsize=64)
def _readers(model: type[Model], names: tuple[str, ...], alias: str, utc: bool) -> list[Reader]:
    return [_reader(model._meta.get_field(name), alias, utc) for name in names]


def _reader(field: Any, alias: str, utc: bool) -> Reader:
    conn = connections[alias]
    column = conn.ops.quote_name(field.column)
    col = field.get_col(field.model._meta.db_table)
    backend = conn.ops.get_db_converters(col)
    converters = backend + col.get_db_converters(conn)

    def each(values: Sequence[Any]) -> list[Any]:
        here = connections[alias]  # this thread's
        return [_each(value, converters, col, here) for value in values]

    if isinstance(field, JSONField) and field.decoder is None and not backend:
        return column, lambda values: _json_values(values) or each(values)
    if isinstance(field, DateTimeField) and utc:
        return f"({column} AT TIME ZONE 'UTC')", _utc_times
    return column, each if converters else None


def _each(value: Any, converters: list[Any], col: Any, conn: Any) -> Any:
    for converter in converters:
        value = converter(value, col, conn)
    return value


def _utc_postgresql(conn: Any) -> bool:
    return bool(conn.vendor == "postgresql" and conn.timezone is dt.UTC)


def _utc_times(values: Sequence[Any]) -> list[Any]:
    utc, last, aware = dt.UTC, None, None
    out = []
    for value in values:
        # The events a task appends share its time: convert each time once.
        if value is not last and value != last:
            last, aware = value, None if value is None else value.replace(tzinfo=utc)
        out.append(aware)
    return out


def _json_values(values: Sequence[Any]) -> list[Any] | None:
    """The values decoded in one parse; ``None`` when they are not all text."""
    if not all(type(value) is str for value in values):
        return None
    # The database holds valid JSON only (jsonb; SQLite's JSON_VALID check), so the
    # joined text is an array of exactly these values.
    decoded: list[Any] = json.loads("[" + ",".join(values) + "]")
    return decoded if len(decoded) == len(values) else None
