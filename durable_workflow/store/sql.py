"""Single-row statements of the hot path, with their SQL text built once.

A workflow step runs some twenty statements that each touch one row by its key.
For those, building the SQL through the ORM costs more than the database's own
work; here the text is composed once per model and column list and cached.
Values still go in and come out through the very fields the ORM uses
(``get_db_prep_save`` and the backend's converters), so what is stored and read
back is exactly what the ORM would store and read, on PostgreSQL and SQLite.

Only the store modules use this, and only for statements on a known shape;
everything else stays ORM.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Model


@dataclasses.dataclass(frozen=True)
class Add:
    """``SET column = column + amount``."""

    amount: int


#: A condition: (field name, operator, value); the operator is ``=``, ``<=``,
#: ``>``, ``<>``, ``IN`` (value: a sequence) or ``IS NULL`` (value ignored).
Condition = tuple[str, str, Any]


class Table:
    """Statements on one model's table."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self.meta = model._meta

    def connection(self) -> Any:
        return connections[router.db_for_write(self.model)]

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
        conn = self.connection()
        locking = for_update and conn.features.has_select_for_update
        sql = self._select_sql(
            tuple(names), self._shape(where), order_by, limit, locking, conn.vendor
        )
        with conn.cursor() as cursor:
            cursor.execute(sql, self._where_params(where, conn))
            rows = cursor.fetchall()
        convert = self._converters(tuple(names), conn.alias)
        return [_converted(row, convert, conn) for row in rows]

    def exists(self, where: Sequence[Condition]) -> bool:
        return bool(self.select(["id"], where, limit=1))

    def update(self, changes: dict[str, Any], where: Sequence[Condition]) -> int:
        """Set ``changes`` (values, or :class:`Add`) on the matching rows; the row count."""
        conn = self.connection()
        names = tuple(changes)
        adds = tuple(name for name, value in changes.items() if isinstance(value, Add))
        sql = self._update_sql(names, adds, self._shape(where))
        params = [
            value.amount if isinstance(value, Add) else self._prep(name, value, conn)
            for name, value in changes.items()
        ]
        with conn.cursor() as cursor:
            cursor.execute(sql, params + self._where_params(where, conn))
            return int(cursor.rowcount)

    def insert(self, rows: Iterable[dict[str, Any]]) -> None:
        """Insert rows that all name the same fields (in batches the backend accepts)."""
        rows = list(rows)
        if not rows:
            return
        conn = self.connection()
        names = tuple(rows[0])
        per_batch = max(1, min(len(rows), _max_params(conn) // len(names)))
        with conn.cursor() as cursor:
            for start in range(0, len(rows), per_batch):
                batch = rows[start : start + per_batch]
                params = [self._prep(name, row[name], conn) for row in batch for name in names]
                cursor.execute(self._insert_sql(names, len(batch)), params)

    # ----------------------------------------------------------------- pieces

    def _column(self, name: str) -> str:
        return _quote(self.meta.get_field(name).column)

    def _prep(self, name: str, value: Any, conn: Any) -> Any:
        return self.meta.get_field(name).get_db_prep_save(value, conn)

    @staticmethod
    def _shape(where: Sequence[Condition]) -> tuple[tuple[str, str, int], ...]:
        return tuple((name, op, len(value) if op == "IN" else 0) for name, op, value in where)

    def _where_params(self, where: Sequence[Condition], conn: Any) -> list[Any]:
        params: list[Any] = []
        for name, op, value in where:
            if op == "IN":
                params.extend(self._prep(name, item, conn) for item in value)
            elif op != "IS NULL":
                params.append(self._prep(name, value, conn))
        return params

    def _where_sql(self, shape: tuple[tuple[str, str, int], ...]) -> str:
        parts = []
        for name, op, size in shape:
            column = self._column(name)
            if op == "IN":
                parts.append(f"{column} IN ({', '.join(['%s'] * size)})")
            elif op == "IS NULL":
                parts.append(f"{column} IS NULL")
            else:
                parts.append(f"{column} {op} %s")
        return " AND ".join(parts) or "1 = 1"

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one Table per model, for the process
    def _select_sql(
        self,
        names: tuple[str, ...],
        shape: tuple[tuple[str, str, int], ...],
        order_by: str | None,
        limit: int | None,
        locking: bool,
        vendor: str,
    ) -> str:
        columns = ", ".join(self._column(name) for name in names)
        sql = f"SELECT {columns} FROM {_quote(self.meta.db_table)} WHERE {self._where_sql(shape)}"
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
        shape: tuple[tuple[str, str, int], ...],
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
            col = self.meta.get_field(name).get_col(self.meta.db_table)
            found = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
            if found:
                out.append((index, found, col))
        return out


def _converted(row: Sequence[Any], convert: list[tuple[int, list[Any], Any]], conn: Any) -> list:
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


def values(row: Model) -> dict[str, Any]:
    """Every column of a built, unsaved row, by attribute name (for :meth:`Table.insert`)."""
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}
