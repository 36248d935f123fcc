"""How the engine's statements travel to the database: together, in as few round trips
as the order of their outcomes allows.

On PostgreSQL with client-side binding (Django's default) round trips are saved
three ways, none of which changes the order in which statements run:

* a transaction can *defer* writes nobody reads the outcome of (inside
  :func:`batched`): they wait, and travel in the same query as the next
  statement of any kind, or at the end of the block;
* a transaction the executor owns (:func:`atomic`) sends its ``COMMIT`` with
  those last writes;
* :func:`together` sends several statements as one query and reads each one's
  outcome in turn (each still starts once the one before it is done, a lock
  wait included).

Each query's values are rendered here, with the driver's own adapters, into the
text psycopg would have built: its client-side binding parses a query of more
than 50 values anew every time, and a step's last batch has well over a hundred.
The engine's own statements go as ``EXECUTE`` statements of prepared ones
(:mod:`durable_workflow.store.prepared`). An error in any statement still fails
the transaction before, or as, it commits. Elsewhere (SQLite, server-side
binding) every statement runs on its own, at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Model

from durable_workflow.store import prepared


@dataclasses.dataclass(frozen=True)
class Statement:
    """One statement and how to read its outcome from the cursor, for :func:`together`."""

    sql: str
    params: list[Any]
    outcome: Callable[[Any], Any]


class _Deferred(threading.local):
    def __init__(self) -> None:
        self.alias: str | None = None
        self.conn: Any = None  # connections[alias], looked up once per block
        #: (sql, preparable): the engine's own statements may be prepared, the rest not.
        self.statements: list[tuple[str, bool]] = []
        self.params: list[Any] = []
        self.flushing = False
        #: The transaction is ours and not begun yet: the first query carries its BEGIN.
        self.begin = False


_deferred = _Deferred()


@contextlib.contextmanager
def atomic(model: type[Model]) -> Iterator[None]:
    """``transaction.atomic()`` for ``model``'s database, with :func:`batched` writes.

    When this is the outermost block (the usual case for a task), its last flush also
    carries the ``COMMIT``, so the driver has nothing left to send when Django commits.
    """
    with transaction.atomic(using=router.db_for_write(model)), batched(model, commit=True):
        yield


@contextlib.contextmanager
def batched(model: type[Model], *, commit: bool = False) -> Iterator[None]:
    """Let writes marked ``defer`` wait and go out together (PostgreSQL with client-side
    binding, Django's default; elsewhere every statement runs at once).

    Use it inside the transaction's ``atomic()`` block, so it flushes before the commit.
    ``commit`` (only for :func:`atomic`, which owns that block): end the transaction in
    the last flush when the block is the outermost one.
    """
    conn = connections[router.db_for_write(model)]
    usable = multi_statement(conn) and _deferred.alias is None
    if not usable:
        yield
        return
    _deferred.alias, _deferred.conn = conn.alias, conn
    commit = commit and _outermost(conn)
    _deferred.begin = commit and _begin_with_first_query(conn)
    try:
        with conn.execute_wrapper(_flush_first):
            yield
            flush(commit=commit and _outermost(conn))
    finally:
        _deferred.alias, _deferred.conn = None, None
        _deferred.begin = False
        _deferred.statements, _deferred.params = [], []


def _begin_with_first_query(conn: Any) -> bool:
    """Let the block's first query carry its ``BEGIN`` (one round trip fewer).

    psycopg sends a ``BEGIN`` of its own before the first statement of a
    transaction when it is not in autocommit mode, which Django's ``atomic()`` has
    just turned off. Switched back on, the driver sends nothing but what it is
    given; the server is in a transaction from the ``BEGIN`` on, and when the
    block ends, Django's commit or rollback finds it closed (``COMMIT`` sent with
    the last writes) or closes it, then turns autocommit on as usual.
    """
    raw = conn.connection
    if raw is None or raw.autocommit or raw.info.transaction_status != _idle():
        return False
    raw.autocommit = True
    return True


def _idle() -> Any:
    from psycopg.pq import TransactionStatus

    return TransactionStatus.IDLE


def _opening() -> str:
    """``BEGIN`` for the query about to go, when the transaction is not begun yet."""
    if not _deferred.begin:
        return ""
    _deferred.begin = False
    return "BEGIN;\n"


def _outermost(conn: Any) -> bool:
    """Is the connection in one atomic block that commits when it exits, and nothing else?"""
    return (
        len(conn.atomic_blocks) == 1
        and not conn.savepoint_ids
        and conn.commit_on_exit
        and not conn.needs_rollback
    )


def flush(*, commit: bool = False) -> None:
    """Send the deferred writes now (one round trip); with ``commit``, end the
    transaction in the same round trip (only from :func:`atomic`)."""
    statements, params = _deferred.statements, _deferred.params
    if commit and (statements or not _deferred.begin):  # a transaction never begun: no COMMIT
        statements = [*statements, ("COMMIT", False)]
    if not statements or _deferred.flushing or _deferred.alias is None:
        return
    _deferred.statements, _deferred.params = [], []
    _deferred.flushing = True
    try:
        conn = _deferred.conn
        with conn.cursor() as cursor:
            _send(prepared.query(conn, statements), params, cursor.cursor, cursor.execute)
    finally:
        _deferred.flushing = False


def defer(conn: Any, sql: str, params: list[Any]) -> bool:
    if _deferred.alias != conn.alias:
        return False
    _deferred.statements.append((sql, True))
    _deferred.params.extend(params)
    return True


def batching(model: type[Model]) -> bool:
    """Do writes on ``model``'s connection wait for the next round trip here (inside
    :func:`batched`, on PostgreSQL with client-side binding)?"""
    return _deferred.alias is not None and _deferred.alias == connection_for(model).alias


def defer_all(model: type[Model], statements: Sequence[Statement]) -> None:
    """Let statements whose outcome nobody reads (e.g. :func:`expect_rows`) wait for the
    next round trip (only where :func:`batching`)."""
    assert batching(model), "deferred statements need a batched block"
    conn = connection_for(model)
    for statement in statements:
        defer(conn, statement.sql, statement.params)


def _send(
    query: prepared.Query,
    params: list[Any] | None,
    raw: Any,
    execute: Callable[[str], Any],
    *,
    ours: bool = True,
) -> int:
    """Run ``query`` with ``params`` rendered in, by ``execute(text)`` (no values left for
    the driver to bind); record what it prepared. ``raw``: the driver's cursor;
    ``ours``: the connection is the one :func:`batched` manages.

    Returns how many results come before those of the query's statements (its
    ``PREPARE``\\ s, and the transaction's ``BEGIN`` when it carries that).
    """
    text = query.text if params is None else _bound(raw, query.text, params)
    opening = _opening() if ours else ""
    try:
        execute(opening + text)
    except Exception as exc:
        query.failed(exc)
        raise
    query.sent()
    return query.leading + (1 if opening else 0)


def _bound(raw: Any, text: str, params: Sequence[Any]) -> str:
    """``text`` with each ``%s`` replaced by a value and ``%%`` by ``%``: what psycopg's
    client-side binding sends, built with its adapters, without parsing the text
    (the most common types of the engine's values rendered here, byte for byte as
    psycopg renders them)."""
    from psycopg.adapt import Transformer

    adapt = Transformer.from_context(raw)
    encoding = raw.connection.info.encoding
    literals = []
    for value in params:
        render = _LITERALS.get(type(value))
        if render is not None:
            literal = render(value)
        elif isinstance(value, str) and not _NEEDS_ESCAPE.intersection(value):
            literal = b"'%s'" % value.encode(encoding)  # a TextChoices member included
        else:
            literal = None
        literals.append(literal if literal is not None else adapt.as_literal(value))
    return (text.encode(encoding) % tuple(literals)).decode(encoding)


def _datetime(value: dt.datetime) -> bytes | None:
    if value.tzinfo is None:
        return None  # a timestamp without time zone: psycopg's own dumper
    return b"'%s'::timestamptz" % str(value).encode()


_NEEDS_ESCAPE = frozenset("'\\\x00")

_LITERALS: dict[type, Callable[[Any], bytes | None]] = {
    type(None): lambda value: b"NULL",
    bool: lambda value: b"true" if value else b"false",
    int: lambda value: b"%d" % value if value >= 0 else b" %d" % value,
    uuid.UUID: lambda value: b"'%s'::uuid" % value.hex.encode(),
    dt.datetime: _datetime,
}


_SAVEPOINT_STATEMENTS = ("SAVEPOINT ", "RELEASE SAVEPOINT ", "ROLLBACK TO SAVEPOINT ")


def _flush_first(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
    """Any other statement on the connection runs after the deferred writes (and the
    transaction's ``BEGIN``, when not sent yet), in the same round trip when it can
    (the cursor then shows that statement's result).

    Savepoint statements (``atomic()`` blocks) have no result anyone reads: they
    join the deferred writes, in order.
    """
    if _deferred.flushing:
        return execute(sql, params, many, context)
    if not params and not many and isinstance(sql, str) and sql.startswith(_SAVEPOINT_STATEMENTS):
        _deferred.statements.append((sql, False))
        return None
    if not _deferred.statements and not _deferred.begin:
        return execute(sql, params, many, context)
    if (
        many
        or not isinstance(sql, str)
        or not (isinstance(params, (list, tuple)) or (params is None and "%" not in sql))
    ):
        flush()
        if _opening():  # on its own: this executor may be executemany's
            context["cursor"].cursor.execute("BEGIN")
        return execute(sql, params, many, context)
    statements, deferred = _deferred.statements, _deferred.params
    _deferred.statements, _deferred.params = [], []
    query = prepared.query(context["connection"], [*statements, (sql, False)])
    values = None if params is None and not deferred else [*deferred, *(params or [])]
    cursor = context["cursor"].cursor
    results = []
    _deferred.flushing = True
    try:
        skip = _send(
            query, values, cursor, lambda text: results.append(execute(text, None, many, context))
        )
    finally:
        _deferred.flushing = False
    for _ in range(skip + len(statements)):
        cursor.nextset()  # the caller reads its own statement's result
    return results[0]


def together(model: type[Model], statements: Sequence[Statement]) -> list[Any]:
    """Run statements in order and return their outcomes: in one round trip on
    PostgreSQL with client-side binding, one by one elsewhere.

    Each statement still runs on its own, after the one before it has finished
    (a lock it waited for included). An error in one stops the rest.
    """
    conn = connection_for(model)
    with conn.cursor() as cursor:
        if not multi_statement(conn):
            outcomes = []
            for statement in statements:
                cursor.execute(statement.sql, statement.params)
                outcomes.append(statement.outcome(cursor))
            return outcomes
        ours = _deferred.alias == conn.alias and not _deferred.flushing
        waiting, values = _take_deferred(conn) if ours else ([], [])
        query = prepared.query(conn, [*waiting, *((s.sql, True) for s in statements)])
        params = [*values, *(p for s in statements for p in s.params)]
        _deferred.flushing = True
        try:
            skip = _send(query, params, cursor.cursor, cursor.execute, ours=ours)
        finally:
            _deferred.flushing = False
        for _ in range(skip + len(waiting)):
            cursor.cursor.nextset()
        outcomes = []
        for index, statement in enumerate(statements):
            if index:
                cursor.cursor.nextset()
            outcomes.append(statement.outcome(cursor))
        return outcomes


#: What a refuted expectation (:func:`expect_rows`) makes the server say.
REFUTED = "dw:expectation refuted"


def expect_rows(statement: Statement, count: int) -> Statement:
    """``statement`` (a ``SELECT`` or an ``UPDATE``), failing its transaction unless it
    finds exactly ``count`` rows: for outcomes assumed rather than read (see
    :func:`refuted`). Its own outcome is nothing to read."""
    check = _refuting(f"count(*) = {int(count)}")
    if statement.sql.startswith("UPDATE "):
        sql = f"WITH expected AS ({statement.sql} RETURNING 1) SELECT {check} FROM expected"
    else:
        sql = f"SELECT {check} FROM ({statement.sql}) AS expected"
    return Statement(sql, statement.params, lambda cursor: None)


def expect_false(clauses: Sequence[tuple[str, list[Any]]]) -> Statement:
    """SQL truths (as for ``sql.truths``) expected all false; else the transaction fails."""
    held = " OR ".join(f"({clause})" for clause, _ in clauses)
    return Statement(
        f"SELECT {_refuting(f'NOT ({held})')}",
        [param for _, params in clauses for param in params],
        lambda cursor: None,
    )


def _refuting(condition: str) -> str:
    # Evaluated at run time only (the condition reads rows), so a false one raises
    # "invalid input syntax for type integer" naming REFUTED, and true costs nothing.
    return f"CAST(CASE WHEN {condition} THEN '1' ELSE '{REFUTED}' END AS integer)"


def refuted(exc: BaseException) -> bool:
    """Did a statement of :func:`expect_rows` or :func:`expect_false` fail its transaction?"""
    while exc is not None:
        if REFUTED in str(exc):
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


def connection_for(model: type[Model]) -> Any:
    """The connection for the engine's statements on ``model``: inside a batched block
    the block's own (one engine transaction spans all the engine's tables, so they
    share a database), elsewhere the router's choice."""
    if _deferred.conn is not None:
        return _deferred.conn
    return connections[router.db_for_write(model)]


def _take_deferred(conn: Any) -> tuple[list[tuple[str, bool]], list[Any]]:
    """The writes waiting on ``conn`` (they go first in the query about to be sent)."""
    taken = _deferred.statements, _deferred.params
    _deferred.statements, _deferred.params = [], []
    return taken


def multi_statement(conn: Any) -> bool:
    """Does the connection take several statements in one query (PostgreSQL's simple
    protocol, which Django's default client-side binding uses)?"""
    return (
        conn.vendor == "postgresql"
        and conn.settings_dict.get("OPTIONS", {}).get("server_side_binding") is not True
    )
