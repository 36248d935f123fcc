"""Answers the engine assumes instead of reading, checked by the database.

An expectation is a statement that travels with a transaction's writes
(:func:`durable_workflow.store.roundtrips.defer_all`) and fails the transaction
unless the database agrees with what the engine assumed: that a locking read finds
exactly so many rows (:func:`expect_rows`), or that some truths are all false
(:func:`expect_false`). It fails by calling ``durable_workflow_refuted()`` (created
by migration ``0023``), which raises SQLSTATE :data:`REFUTED_SQLSTATE`; the
executor recognises a refuted transaction by that code (:func:`refuted`), never by
the text of the server's message, which depends on its language and version.

PostgreSQL only: the engine makes no assumptions elsewhere (writes are not
deferred there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_workflow.store.roundtrips import Statement

#: The SQLSTATE of a refuted expectation (class ``DW``: not one PostgreSQL uses).
REFUTED_SQLSTATE = "DW001"


def _nothing(cursor: object) -> None:
    return None


def expect_rows(statement: Statement[Any], count: int) -> Statement[None]:
    """``statement`` (a ``SELECT`` or an ``UPDATE``), failing its transaction unless it
    finds exactly ``count`` rows: for outcomes assumed rather than read. Its own
    outcome is nothing to read."""
    check = _refuting(f"count(*) = {int(count)}", "rows")
    if statement.sql.startswith("UPDATE "):
        sql = f"WITH expected AS ({statement.sql} RETURNING 1) SELECT {check} FROM expected"
    else:
        sql = f"SELECT {check} FROM ({statement.sql}) AS expected"
    return Statement(sql, statement.params, _nothing)


def expect_false(clauses: Sequence[tuple[str, list[Any]]]) -> Statement[None]:
    """SQL truths (as for ``sql.truths``) expected all false; else the transaction fails."""
    held = " OR ".join(f"({clause})" for clause, _ in clauses)
    return Statement(
        f"SELECT {_refuting(f'NOT ({held})', 'truths')}",
        [param for _, params in clauses for param in params],
        _nothing,
    )


def _refuting(condition: str, what: str) -> str:
    # The function is volatile, so it is called at run time only, when the condition
    # (which reads rows) is false; a true one costs nothing. ``what`` is one of this
    # module's own words, never a caller's string.
    return f"CASE WHEN {condition} THEN 1 ELSE durable_workflow_refuted('{what}') END"


def refuted(exc: BaseException | None) -> bool:
    """Did an expectation fail ``exc``'s transaction? (The driver's error, or Django's
    error wrapping it: the SQLSTATE is looked up along the chain of causes.)"""
    seen = 0
    while exc is not None and seen < 10:
        if getattr(exc, "sqlstate", None) == REFUTED_SQLSTATE:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
