"""Connections that died are discarded before the next piece of work uses them.

Celery's Django fixup closes a worker's connections around every task, unless
``CELERY_DB_REUSE_MAX`` is set: then nothing looks at them, and one connection
the server dropped (a restart, a failover, ``pg_terminate_backend``) fails every
later task of the process with "the connection is lost". The engine's task entry
points call :func:`discard_broken` before and after each task, whatever that
setting says. Only broken connections go; a healthy one is kept however old it
is (its age is ``CONN_MAX_AGE``'s business, at the points Django checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import DatabaseError, connections

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")


def discard_broken() -> bool:
    """Close this thread's connections that cannot serve another query; ``True`` if any
    was closed. A connection inside an atomic block is left to its owner."""
    closed = False
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block or not _broken(conn):
            continue
        try:
            conn.close()
        except DatabaseError:  # closing a dead socket may complain; it is gone either way
            conn.connection = None
        logger.info("discarded a broken database connection (%s)", conn.alias)
        closed = True
    return closed


def close_thread_connections() -> None:
    """Close every connection this thread opened (a helper thread between rounds)."""
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except DatabaseError:
            conn.connection = None


def _broken(conn: BaseDatabaseWrapper) -> bool:
    raw = conn.connection
    if getattr(raw, "closed", False) or getattr(raw, "broken", False):
        return True
    if conn.errors_occurred:
        if not conn.is_usable():
            return True
        conn.errors_occurred = False  # an error in a query, not in the connection
    return False
