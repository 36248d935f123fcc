"""Single-row statements of the hot path, with their SQL text built once.

A workflow step runs some twenty statements that each touch one row by its key.
For those, building the SQL through the ORM costs more than the database's own
work; here the text is composed once per model and column list and cached.
Values still go in and come out through the very fields the ORM uses
(``get_db_prep_save`` and the backend's converters), so what is stored and read
back is exactly what the ORM would store and read, on PostgreSQL and SQLite.

Only the store modules use this, and only for statements on a known shape;
everything else stays ORM. How the statements travel (several per round trip,
writes deferred, the ``COMMIT`` with the last of them) is
:mod:`durable_workflow.store.roundtrips`, and answers assumed rather than read are
:mod:`durable_workflow.store.expectations`; their entry points are re-exported here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any, cast

from django.db import connections
from django.db.models import Field, Model

from durable_workflow.store import columns, roundtrips
from durable_workflow.store.expectations import expect_false, expect_rows, refuted
from durable_workflow.store.roundtrips import (
    Rows,
    Statement,
    batched,
    batching,
    defer_all,
    flush,
    one,
    orm,
    together,
)
from durable_workflow.store.savepoints import atomic, foreign, savepoint

__all__ = [
    "Add",
    "Built",
    "Condition",
    "Rows",
    "Statement",
    "Table",
    "atomic",
    "batched",
    "batching",
    "defer_all",
    "expect_false",
    "expect_rows",
    "flush",
    "foreign",
    "one",
    "orm",
    "refuted",
    "savepoint",
    "together",
    "truths",
    "truths_statement",
    "values",
]


@dataclasses.dataclass(frozen=True)
class Add:
    """``SET column = column + amount``."""

    amount: int


#: Values that text, integer and boolean fields pass to the driver unchanged.
_AS_IS = frozenset({str, int, bool})
_PLAIN_TYPES = frozenset(
    {
        "CharField",
        "TextField",
        "IntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "PositiveBigIntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "BooleanField",
    }
)

#: A condition: (field name, operator, value); the operator is ``=``, ``<=``,
#: ``>``, ``<>``, ``IN`` or ``NOT IN`` (value: a non-empty sequence), ``IN SELECT`` or
#: ``> SELECT`` (value: a :class:`Statement` selecting one column; one row for ``>``) or
#: ``IS NULL`` (value ignored).
Condition = tuple[str, str, Any]


_SUBQUERY = frozenset({"IN SELECT", "> SELECT"})


class Table:
    """Statements on one model's table."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self.meta = model._meta

    def connection(self) -> Any:
        return roundtrips.connection_for(self.model)

    # ------------------------------------------------------------- statements

    def select(
        self,
        names: Sequence[str],
        where: Sequence[Condition],
        *,
        order_by: str | None = None,
        limit: int | None = None,
        for_update: bool = False,
    ) -> list[list[Any]]:
        """Rows of the named fields, converted to Python values."""
        statement = self.select_statement(
            names, where, order_by=order_by, limit=limit, for_update=for_update
        )
        return one(self.model, statement)

    def select_statement(
        self,
        names: Sequence[str],
        where: Sequence[Condition],
        *,
        order_by: str | None = None,
        limit: int | None = None,
        for_update: bool = False,
    ) -> Statement[list[list[Any]]]:
        """:meth:`select` as a :class:`Statement` (its outcome: the converted rows)."""
        conn = self.connection()
        locking = for_update and conn.features.has_select_for_update
        sql = self._select_sql(tuple(names), self._shape(where), order_by, limit, locking)
        convert = self._converters(tuple(names), conn.alias)
        return Statement(
            sql,
            self._where_params(where, conn),
            lambda cursor: [_converted(row, convert, conn) for row in cursor.fetchall()],
        )

    def select_columns_statement(
        self, names: Sequence[str], where: Sequence[Condition], *, order_by: str | None = None
    ) -> Statement[list[list[Any]]]:
        """:meth:`select_statement` for reads of many rows (a run's whole history), its
        outcome the converted columns, each in row order: values are converted a column
        at a time (:mod:`durable_workflow.store.columns`), to the same values."""
        conn = self.connection()
        readers = columns.readers(self.model, tuple(names), conn)
        selected = tuple(sql for sql, _ in readers)
        sql = self._select_sql(tuple(names), self._shape(where), order_by, None, False, selected)

        def outcome(cursor: Rows) -> list[list[Any]]:
            rows = cursor.fetchall()
            values = list(zip(*rows, strict=True)) if rows else [()] * len(readers)
            return [
                convert(column) if convert else list(column)
                for (_, convert), column in zip(readers, values, strict=True)
            ]

        return Statement(sql, self._where_params(where, conn), outcome)

    def exists(self, where: Sequence[Condition]) -> bool:
        return bool(self.select(["id"], where, limit=1))

    def exists_clause(self, where: Sequence[Condition]) -> tuple[str, list[Any]]:
        """``EXISTS (…)`` over this table, for :func:`truths`."""
        table = _quote(self.meta.db_table)
        sql = f"EXISTS (SELECT 1 FROM {table} WHERE {self._where_sql(self._shape(where))})"
        return sql, self._where_params(where, self.connection())

    def update(
        self, changes: dict[str, Any], where: Sequence[Condition], *, defer: bool = False
    ) -> int | None:
        """Set ``changes`` (values, or :class:`Add`) on the matching rows; the row count
        (``None`` when ``defer`` let the statement wait for the next round trip)."""
        statement = self.update_statement(changes, where)
        if defer and roundtrips.defer(self.connection(), statement.sql, statement.params):
            return None
        return one(self.model, statement)

    def update_statement(
        self, changes: dict[str, Any], where: Sequence[Condition]
    ) -> Statement[int]:
        """:meth:`update` as a :class:`Statement` (its outcome: the row count)."""
        conn = self.connection()
        names = tuple(changes)
        adds = tuple(name for name, value in changes.items() if isinstance(value, Add))
        sql = self._update_sql(names, adds, self._shape(where))
        params = [
            value.amount if isinstance(value, Add) else self._prep(name, value, conn)
            for name, value in changes.items()
        ]
        params += self._where_params(where, conn)
        return Statement(sql, params, lambda cursor: int(cursor.rowcount))

    def insert(self, rows: Iterable[dict[str, Any]], *, defer: bool = False) -> None:
        """Insert rows that all name the same fields (in batches the backend accepts)."""
        rows = list(rows)
        if not rows:
            return
        conn = self.connection()
        names = tuple(rows[0])
        per_batch = max(1, min(len(rows), _max_params(conn) // len(names)))
        for start in range(0, len(rows), per_batch):
            batch = rows[start : start + per_batch]
            params = [self._prep(name, row[name], conn) for row in batch for name in names]
            sql = self._insert_sql(names, len(batch))
            if not (defer and roundtrips.defer(conn, sql, params)):
                together(self.model, [Statement(sql, params, lambda cursor: None)])

    # ----------------------------------------------------------------- pieces

    def _column(self, name: str) -> str:
        column = self._field(name).column
        assert column is not None, name  # a concrete field has its column
        return _quote(column)

    def _field(self, name: str) -> Field[Any, Any]:
        # The engine's statements name concrete fields only, never a reverse relation.
        return cast("Field[Any, Any]", self.meta.get_field(name))

    def _prep(self, name: str, value: Any, conn: Any) -> Any:
        if value is None or (type(value) in _AS_IS and name in self._plain):
            return value  # what the field would hand the driver anyway
        return self._field(name).get_db_prep_save(value, conn)

    @functools.cached_property
    def _plain(self) -> frozenset[str]:
        """Text, integer and boolean columns (by name and attribute name)."""
        names = set()
        for field in self.meta.concrete_fields:
            if field.get_internal_type() in _PLAIN_TYPES:
                names.update({field.name, field.attname})
        return frozenset(names)

    @staticmethod
    def _shape(where: Sequence[Condition]) -> tuple[tuple[str, str, Any], ...]:
        return tuple(
            (
                name,
                op,
                len(value) if op in ("IN", "NOT IN") else value.sql if op in _SUBQUERY else 0,
            )
            for name, op, value in where
        )

    def _where_params(self, where: Sequence[Condition], conn: Any) -> list[Any]:
        params: list[Any] = []
        for name, op, value in where:
            if op in ("IN", "NOT IN"):
                params.extend(self._prep(name, item, conn) for item in value)
            elif op in _SUBQUERY:
                params.extend(value.params)
            elif op != "IS NULL":
                params.append(self._prep(name, value, conn))
        return params

    def _where_sql(self, shape: tuple[tuple[str, str, Any], ...]) -> str:
        parts = []
        for name, op, size in shape:
            column = self._column(name)
            if op in ("IN", "NOT IN"):
                parts.append(f"{column} {op} ({', '.join(['%s'] * size)})")
            elif op in _SUBQUERY:
                parts.append(f"{column} {op.split()[0]} ({size})")
            elif op == "IS NULL":
                parts.append(f"{column} IS NULL")
            else:
                parts.append(f"{column} {op} %s")
        return " AND ".join(parts) or "1 = 1"

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one Table per model, for the process
    def _select_sql(
        self,
        names: tuple[str, ...],
        shape: tuple[tuple[str, str, Any], ...],
        order_by: str | None,
        limit: int | None,
        locking: bool,
        selected: tuple[str, ...] | None = None,
    ) -> str:
        listed = ", ".join(selected or (self._column(name) for name in names))
        sql = f"SELECT {listed} FROM {_quote(self.meta.db_table)} WHERE {self._where_sql(shape)}"
        if order_by:
            sql += f" ORDER BY {self._column(order_by)}"
        if limit:
            sql += f" LIMIT {int(limit)}"
        if locking:
            sql += " FOR UPDATE"
        return sql

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _update_sql(
        self,
        names: tuple[str, ...],
        adds: tuple[str, ...],
        shape: tuple[tuple[str, str, Any], ...],
    ) -> str:
        sets = ", ".join(
            f"{column} = {column} + %s" if name in adds else f"{column} = %s"
            for name, column in ((name, self._column(name)) for name in names)
        )
        return f"UPDATE {_quote(self.meta.db_table)} SET {sets} WHERE {self._where_sql(shape)}"

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _insert_sql(self, names: tuple[str, ...], count: int) -> str:
        columns = ", ".join(self._column(name) for name in names)
        row = "(" + ", ".join(["%s"] * len(names)) + ")"
        return f"INSERT INTO {_quote(self.meta.db_table)} ({columns}) VALUES " + ", ".join(
            [row] * count
        )

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _converters(self, names: tuple[str, ...], alias: str) -> list[tuple[int, list[Any], Any]]:
        conn = connections[alias]
        out = []
        for index, name in enumerate(names):
            col = self._field(name).get_col(self.meta.db_table)
            found = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
            if found:
                out.append((index, found, col))
        return out


def _converted(
    row: Sequence[Any], convert: list[tuple[int, list[Any], Any]], conn: Any
) -> list[Any]:
    values = list(row)
    for index, converters, col in convert:
        value = values[index]
        for converter in converters:
            value = converter(value, col, conn)
        values[index] = value
    return values


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _max_params(conn: Any) -> int:
    return 999 if conn.vendor == "sqlite" else 30000


class Built:
    """A row to insert: each concrete field of ``model`` by attribute name, defaults as
    the ORM fills them in, ``values`` on top. What an unsaved model instance holds,
    without its cost (about 20 µs to build; the hot path builds a few per step)."""

    def __init__(self, model: type[Model], **values: Any) -> None:
        self._meta = model._meta
        for attname, default in _defaults(model):
            if attname not in values:
                setattr(self, attname, default())
        for name, value in values.items():
            setattr(self, name, value)


@functools.cache
def _defaults(model: type[Model]) -> tuple[tuple[str, Any], ...]:
    return tuple((field.attname, field.get_default) for field in model._meta.concrete_fields)


def values(row: Model | Built) -> dict[str, Any]:
    """Every column of a built, unsaved row, by attribute name (for :meth:`Table.insert`)."""
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}


def truths(model: type[Model], clauses: Sequence[tuple[str, list[Any]]]) -> list[bool]:
    """Several SQL truths (e.g. :meth:`Table.exists_clause`) in one round trip.

    Ask them after taking the lock they depend on, never in the locking read: a
    statement that waited for a row lock answers everything else from before its wait.
    """
    return one(model, truths_statement(clauses))


def truths_statement(clauses: Sequence[tuple[str, list[Any]]]) -> Statement[list[bool]]:
    """:func:`truths` as a :class:`Statement` (each statement of :func:`together` reads
    the database as it is once the ones before it, locks included, are done)."""
    sql = "SELECT " + ", ".join(f"({clause})" for clause, _ in clauses)
    return Statement(
        sql,
        [param for _, params in clauses for param in params],
        lambda cursor: [bool(value) for value in cursor.fetchone()],
    )
