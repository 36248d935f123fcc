"""How the engine's own statements travel to the database: together, in as few round
trips as the order of their outcomes allows.

This is an explicit API: only statements handed to it (:func:`together`,
:func:`defer`, :func:`defer_all`, :func:`hold`, and
:class:`durable_workflow.store.sql.Table`'s methods built on them) are batched,
rendered or prepared. Nothing watches the connection: no execute wrapper, and no
statement of anyone else's is rewritten or held back.

On PostgreSQL with client-side binding (Django's default) round trips are saved
three ways, none of which changes the order in which statements run:

* a transaction can *defer* writes nobody reads the outcome of (inside
  :func:`batched`): they wait, and travel in the same query as the engine's next
  statement, or at the end of the block (the engine's savepoints wait the same
  way: :mod:`durable_workflow.store.savepoints`);
* a transaction the executor owns (``savepoints.atomic``) sends its ``BEGIN`` with
  its first query and its ``COMMIT`` with its last writes;
* :func:`together` sends several statements as one query and reads each one's
  outcome in turn (each still starts once the one before it is done, a lock
  wait included).

The order with other statements is a contract, not a watch: while the engine
holds something back (:func:`holding`), no statement that is not the engine's may
reach the connection, since it would run before the held-back writes (or, before
the ``BEGIN``, outside the transaction). So the engine sends what waits before it
hands control to other code: its models' manager does before an ORM query
(:mod:`durable_workflow.models.manager`), :func:`orm` (or ``savepoints.foreign``,
for a project's code) around anything else. The test suite fails a test that
breaks it.

Each query's values are rendered here, with the driver's own adapters, into the
text psycopg would have built: its client-side binding parses a query of more
than 50 values anew every time, and a step's last batch has well over a hundred.
The engine's statements go as ``EXECUTE`` statements of prepared ones
(:mod:`durable_workflow.store.prepared`). An error in any statement still fails
the transaction before, or as, it commits. Elsewhere (SQLite, server-side
binding) every statement runs on its own, at once.

What this module reads or sets of Django's connection is its public surface only:
``in_atomic_block``, ``transaction.get_autocommit()``, ``transaction.get_rollback()``,
``cursor()`` and ``connection`` (the driver's documented DB-API connection, whose
``autocommit`` and ``info`` are psycopg's public API).

``docs/performance.md`` compares this with psycopg 3's pipeline mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from django.db import DatabaseError, connections, router, transaction
from django.db.models import Model

from durable_workflow.store import literals, prepared

T = TypeVar("T")
U = TypeVar("U")


class Rows(Protocol):
    """What a statement's outcome reads its result from (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


@dataclasses.dataclass(frozen=True)
class Statement(Generic[T]):
    """One statement of the engine's and how to read its outcome from the cursor, for
    :func:`together`."""

    sql: str
    params: list[Any]
    outcome: Callable[[Rows], T]

    def then(self, read: Callable[[T], U]) -> Statement[U]:
        """The same statement, its outcome passed through ``read``."""
        outcome = self.outcome
        return Statement(self.sql, self.params, lambda cursor: read(outcome(cursor)))


class _Deferred(threading.local):
    def __init__(self) -> None:
        self.alias: str | None = None
        self.conn: Any = None  # connections[alias], looked up once per block
        #: (sql, preparable): the engine's own statements may be prepared, COMMIT not.
        self.statements: list[tuple[str, bool]] = []
        self.params: list[Any] = []
        self.flushing = False
        #: The transaction is ours and not begun yet: the first query carries its BEGIN.
        self.begin = False
        #: How many times what was held back has been taken to be sent (see :class:`Mark`).
        self.sends = 0


_deferred = _Deferred()


@contextlib.contextmanager
def batched(model: type[Model], *, commit: bool = False) -> Iterator[None]:
    """Let writes marked ``defer`` wait and go out together (PostgreSQL with client-side
    binding, Django's default; elsewhere every statement runs at once).

    Use it inside the transaction's ``atomic()`` block, so it flushes before the commit.
    ``commit`` (only for ``savepoints.atomic``, which owns that block and knows it is the
    outermost one): end the transaction in the last flush, unless the block is to roll
    back.
    """
    conn = connections[router.db_for_write(model)]
    if not multi_statement(conn) or _deferred.alias is not None:
        yield
        return
    _deferred.alias, _deferred.conn = conn.alias, conn
    _deferred.begin = commit and _begin_with_first_query(conn)
    try:
        yield
        flush(commit=commit and not transaction.get_rollback(using=conn.alias))
    finally:
        _deferred.alias, _deferred.conn = None, None
        _deferred.begin = False
        _deferred.statements, _deferred.params = [], []


def _begin_with_first_query(conn: Any) -> bool:
    """Let the block's first query carry its ``BEGIN`` (one round trip fewer).

    psycopg sends a ``BEGIN`` of its own, in a round trip of its own, before the
    first statement of a transaction when it is not in autocommit mode, which
    Django's ``atomic()`` has just turned off. Switched back on (psycopg's public
    ``autocommit``, on the raw connection Django documents as
    ``connection.connection``), the driver sends nothing but what it is given: the
    ``BEGIN`` goes first in the block's first query (or on its own, when the engine
    flushes before a statement that is not its own: :func:`orm`). When the block ends,
    Django's commit or rollback finds the transaction closed (``COMMIT`` sent with
    the last writes) or closes it, then turns autocommit on as usual. Django's own
    idea of the connection's autocommit (``get_autocommit()``) is not touched.
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


def flush(*, commit: bool = False) -> None:
    """Send the deferred writes now (one round trip; the transaction's ``BEGIN`` first
    when it has not gone yet); with ``commit``, end the transaction in the same round
    trip (only from ``savepoints.atomic``)."""
    if _deferred.flushing or _deferred.alias is None:
        return
    if commit and not _deferred.statements and _deferred.begin:
        return  # a transaction never begun: nothing to send, nothing to commit
    held, params = _take_deferred()
    statements = [*held, ("COMMIT", False)] if commit else held
    if not statements and not _deferred.begin:
        return
    begin = _deferred.begin
    _deferred.flushing = True
    try:
        conn = _deferred.conn
        with conn.cursor() as cursor:
            _send(prepared.query(conn, statements), params, cursor.cursor, cursor.execute)
    except DatabaseError:
        raise
    except BaseException:
        # Refused before it reached the driver (by an execute wrapper, e.g. the guard
        # against queries from a workflow body): it all still waits.
        _deferred.statements[:0], _deferred.params[:0] = held, params
        _deferred.begin = begin
        _deferred.sends -= 1  # nothing was sent
        raise
    finally:
        _deferred.flushing = False


def defer(conn: Any, sql: str, params: list[Any]) -> bool:
    """Let one of the engine's writes on ``conn`` wait for the next round trip; ``False``
    when it cannot (not inside :func:`batched` on that connection): run it now."""
    if _deferred.alias != conn.alias:
        return False
    _deferred.statements.append((sql, True))
    _deferred.params.extend(params)
    return True


def hold(conn: Any, sql: str) -> bool:
    """Let one of the engine's statements without values that is not to be prepared
    (a ``SAVEPOINT``, say) wait for the next round trip, like :func:`defer`."""
    if _deferred.alias != conn.alias:
        return False
    _deferred.statements.append((sql, False))
    return True


def holding(conn: Any) -> bool:
    """Does the engine hold anything back on ``conn`` (the transaction's ``BEGIN``, or
    writes), so that a statement not the engine's must not run on it now?

    The contract of :func:`batched`: the engine calls :func:`flush` (or enters
    :func:`orm`) before it hands control to code that may run statements of its own.
    The test suite checks it on every statement that reaches the driver.
    """
    return (
        _deferred.alias == conn.alias
        and not _deferred.flushing
        and bool(_deferred.statements or _deferred.begin)
    )


@contextlib.contextmanager
def orm() -> Iterator[None]:
    """Around code that is not the engine's (the ORM, a project's hooks) inside a
    :func:`batched` block: what the engine held back goes first, so that code sees the
    database as the engine's code before it left it. The engine's own statements
    inside are held back again, as usual."""
    flush()
    yield


@dataclasses.dataclass(frozen=True)
class Mark:
    """A point in the sequence of held-back statements (:func:`mark`)."""

    sends: int
    statements: int
    params: int


def mark() -> Mark:
    """Where the next held-back statement will go, for :func:`drop_since`."""
    return Mark(_deferred.sends, len(_deferred.statements), len(_deferred.params))


def drop_since(point: Mark) -> bool:
    """Forget the statements held back since ``point``; ``True`` when every one of them
    still waited (none reached the server). Otherwise the statements sent since went
    their way, and those still waiting, all held back after them, are forgotten."""
    if point.sends == _deferred.sends:
        del _deferred.statements[point.statements :]
        del _deferred.params[point.params :]
        return True
    _deferred.statements, _deferred.params = [], []
    return False


def take_back(point: Mark, sql: str) -> bool:
    """Remove the statement ``sql`` held back at ``point`` (one without values) if it
    is still waiting; ``True`` when it was."""
    if point.sends != _deferred.sends or len(_deferred.statements) <= point.statements:
        return False
    if _deferred.statements[point.statements] != (sql, False):
        return False
    del _deferred.statements[point.statements]
    return True


def batching(model: type[Model]) -> bool:
    """Do writes on ``model``'s connection wait for the next round trip here (inside
    :func:`batched`, on PostgreSQL with client-side binding)?"""
    return _deferred.alias is not None and _deferred.alias == connection_for(model).alias


def defer_all(model: type[Model], statements: Sequence[Statement[Any]]) -> None:
    """Let statements whose outcome nobody reads (e.g. an expectation of
    :mod:`durable_workflow.store.expectations`) wait for the next round trip (only
    where :func:`batching`)."""
    if not batching(model):
        raise RuntimeError("deferred statements need a batched block on PostgreSQL")
    conn = connection_for(model)
    for statement in statements:
        defer(conn, statement.sql, statement.params)


def _send(
    query: prepared.Query,
    params: list[Any] | None,
    raw: Any,
    execute: Callable[[str], object],
    *,
    ours: bool = True,
) -> int:
    """Run ``query`` with ``params`` rendered in, by ``execute(text)`` (no values left for
    the driver to bind); record what it prepared. ``raw``: the driver's cursor;
    ``ours``: the connection is the one :func:`batched` manages.

    Returns how many results come before those of the query's statements (its
    ``PREPARE``\\ s, and the transaction's ``BEGIN`` when it carries that).
    """
    text = query.text if params is None else literals.bound(raw, query.text, params)
    opening = _opening() if ours else ""
    try:
        execute(opening + text)
    except Exception as exc:
        query.failed(exc)
        raise
    query.sent()
    return query.leading + (1 if opening else 0)


def together(model: type[Model], statements: Sequence[Statement[Any]]) -> list[Any]:
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
        waiting, values = _take_deferred() if ours else ([], [])
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


def one(model: type[Model], statement: Statement[T]) -> T:
    """:func:`together` for a single statement: its outcome."""
    outcome: T = together(model, [statement])[0]
    return outcome


def connection_for(model: type[Model]) -> Any:
    """The connection for the engine's statements on ``model``: inside a batched block
    the block's own (one engine transaction spans all the engine's tables, so they
    share a database), elsewhere the router's choice."""
    if _deferred.conn is not None:
        return _deferred.conn
    return connections[router.db_for_write(model)]


def _take_deferred() -> tuple[list[tuple[str, bool]], list[Any]]:
    """The writes waiting (they go first in the query about to be sent)."""
    taken = _deferred.statements, _deferred.params
    _deferred.statements, _deferred.params = [], []
    _deferred.sends += 1
    return taken


def multi_statement(conn: Any) -> bool:
    """Does the connection take several statements in one query (PostgreSQL's simple
    protocol, which Django's default client-side binding uses)?"""
    options = conn.settings_dict.get("OPTIONS", {})
    return conn.vendor == "postgresql" and options.get("server_side_binding") is not True
