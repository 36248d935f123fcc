"""Server-side prepared statements for the hot path's statements (PostgreSQL).

The engine's single-row statements (:mod:`durable_workflow.store.sql`) go to the
server as text, several per query (:mod:`durable_workflow.store.roundtrips`).
Parsing and planning that text again each time is most of what the server
spends on them, so on PostgreSQL with client-side binding each one is
``PREPARE``\\ d once per connection and sent as ``EXECUTE name(values)`` from
then on, still inside the same multi-statement query.

A statement's name is derived from its text (``dw_<verb>_<table>_<hash>``), so
a name always means the same statement, whichever process prepared it. What a
connection has prepared is recorded beside it (the driver's connection object:
a new connection starts empty). After an error in a query that carried new
``PREPARE``\\ s, their fate is unknown: the next query that needs one of them
first asks ``pg_prepared_statements``. When the server reports a statement
missing or already there (a ``DISCARD ALL``, a pooler switching sessions), the
record is doubted the same way and the transaction is run again
(:func:`durable_workflow.executor.common.retry_transaction`).

``PREPARED_STATEMENTS`` turns it off; so does a database whose settings set
``DISABLE_SERVER_SIDE_CURSORS`` (Django's flag for a transaction-mode pooler,
behind which session state such as this cannot be relied on).

Prepared statements live in a *server session*, and a pooler may hand each
transaction of one client connection to another one. So it is also turned off,
for one connection, on any sign of that: a connection whose server process is not
the one the driver was told of at connect time (PgBouncer answers with a process
id of its own; one small query per connection tells, and again after the server
refused a statement as missing or already there). Such a connection then sends
plain text, and the refused transaction is run again once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import weakref
from collections.abc import Sequence
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

#: Statements with more values than this go as text (large inserts are one-offs).
MAX_PARAMS = 100
#: Names one connection records at most; statements beyond go as text.
MAX_PER_CONNECTION = 1000

#: SQLSTATEs that mean the server's prepared statements are not what was recorded.
_STALE = frozenset({"26000", "42P05"})  # invalid_sql_statement_name, duplicate_prepared_statement


@dataclasses.dataclass
class _Record:
    """What one connection has prepared."""

    known: set[str] = dataclasses.field(default_factory=set)
    doubtful: set[str] = dataclasses.field(default_factory=set)
    #: ``None``: not asked yet; ``False``: a pooler may switch its server session (or
    #: did), so nothing is prepared on this connection any more.
    own_session: bool | None = None


_records: weakref.WeakKeyDictionary[Any, _Record] = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class _Shape:
    name: str
    prepare: str
    execute: str


_TABLE = re.compile(r'(?:FROM|INTO|UPDATE) "([^"]+)"')


@functools.lru_cache(maxsize=2048)
def _shape(sql: str) -> _Shape | None:
    pieces = sql.split("%s")
    if len(pieces) - 1 > MAX_PARAMS:
        return None
    verb = sql.split(None, 1)[0].lower()
    table = _TABLE.search(sql)
    if verb == "with" and table:  # a data-modifying WITH: named after what it modifies
        verb = table.group(0).split()[0].lower()
    digest = hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
    hint = f"{verb}_{table.group(1) if table else ''}"[:43]  # names stop at 63 bytes
    name = f"dw_{hint}_{digest}"
    prepared = pieces[0] + "".join(f"${i}{piece}" for i, piece in enumerate(pieces[1:], 1))
    values = ", ".join(["%s"] * (len(pieces) - 1))
    execute = f"EXECUTE {name}({values})" if values else f"EXECUTE {name}"
    return _Shape(name, f"PREPARE {name} AS {prepared}", execute)


@dataclasses.dataclass
class Query:
    """The text of one multi-statement query, and what it prepares.

    ``leading``: the results of its ``PREPARE``\\ s, which come before those of the
    statements themselves.
    """

    text: str
    leading: int
    record: _Record | None
    new: list[str]

    def sent(self) -> None:
        """The query succeeded: what it prepared exists."""
        if self.record is not None:
            self.record.known.update(self.new)

    def failed(self, exc: BaseException) -> None:
        """The query failed: what it prepared may or may not exist; on a stale
        statement error, nothing recorded can be trusted any more."""
        if self.record is None:
            return
        self.record.doubtful.update(self.new)
        if stale(exc):
            self.record.doubtful |= self.record.known
            self.record.known.clear()
            # A session switched under the connection, or a DISCARD ALL in the same one:
            # the next query asks the server which (and prepares again only if the latter).
            self.record.own_session = None


def enabled(conn: Any) -> bool:
    return bool(get_settings().PREPARED_STATEMENTS) and not conn.settings_dict.get(
        "DISABLE_SERVER_SIDE_CURSORS"
    )


def query(conn: Any, statements: Sequence[tuple[str, bool]]) -> Query:
    """One query running ``statements`` in order: ``(sql, preparable)`` pairs; the
    preparable ones (the engine's own, with ``%s`` placeholders only) become
    ``EXECUTE``\\ s. ``conn``: the Django connection, already connected."""
    if not enabled(conn) or not any(preparable for _, preparable in statements):
        return Query(";\n".join(sql for sql, _ in statements), 0, None, [])
    record = _records.get(conn.connection)
    if record is None:
        record = _records[conn.connection] = _Record()
    if record.own_session is None:
        record.own_session = _own_session(conn)
    if not record.own_session:
        return Query(";\n".join(sql for sql, _ in statements), 0, None, [])
    shapes = {sql: _shape(sql) for sql, preparable in statements if preparable}
    if record.doubtful and any(s and s.name in record.doubtful for s in shapes.values()):
        _settle_doubts(conn, record)
    prepares: dict[str, str] = {}
    parts = []
    for sql, preparable in statements:
        shape = shapes.get(sql) if preparable else None
        if shape is not None and shape.name not in record.known:
            if len(record.known) + len(prepares) >= MAX_PER_CONNECTION:
                shape = None
            else:
                prepares[shape.name] = shape.prepare
        parts.append(shape.execute if shape is not None else sql)
    return Query(";\n".join([*prepares.values(), *parts]), len(prepares), record, list(prepares))


def _own_session(conn: Any) -> bool:
    """Is the server process behind ``conn`` the one the driver connected to (no pooler
    in between)? Asked once per connection."""
    raw = conn.connection
    with raw.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (server_pid,) = cursor.fetchone()
    if server_pid == raw.info.backend_pid:
        return True
    logger.info(
        "connection %r reaches PostgreSQL through a pooler; prepared statements are off "
        "for it (DURABLE_WORKFLOW['PREPARED_STATEMENTS'])",
        conn.alias,
    )
    return False


def behind_pooler(conn: Any) -> bool:
    """Ask the server now whether a pooler stands between ``conn`` and it (PostgreSQL)."""
    conn.ensure_connection()
    return not _own_session(conn)


def pooled(conn: Any) -> bool | None:
    """What this process learned of ``conn``'s current connection: ``True`` if a pooler
    stands between it and the server (or its session changed), ``False`` if not,
    ``None`` if nothing was asked yet."""
    record = _records.get(conn.connection) if conn.connection is not None else None
    if record is None or record.own_session is None:
        return None
    return not record.own_session


def _settle_doubts(conn: Any, record: _Record) -> None:
    """Ask the server which of the doubtful names it has (one small query, only
    after an error)."""
    with conn.connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE name = ANY(%s)",
            [sorted(record.doubtful)],
        )
        record.known.update(name for (name,) in cursor.fetchall())
    record.doubtful.clear()


def stale(exc: BaseException) -> bool:
    """Did the server refuse a statement because its prepared statements are not
    what this process recorded (the transaction can simply run again)?"""
    while exc is not None:
        if getattr(exc, "sqlstate", None) in _STALE:
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False
