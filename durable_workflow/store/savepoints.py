"""The engine's own savepoints, and ``on_commit`` callbacks that go with them.

Inside the engine's transaction (:func:`durable_workflow.store.roundtrips.batched`,
PostgreSQL with client-side binding) a nested block that must be undone on an error
(a workflow task's commands, a step continued in place) is :func:`savepoint`, not a
nested ``atomic()``: its ``SAVEPOINT`` and ``RELEASE SAVEPOINT`` are the engine's
statements, held back with its writes, so they cost no round trip of their own
(sent alone, they took a step from one round trip to about five). A block that
sent nothing before it ended leaves no trace at all: its savepoint is taken back
unsent, and on an error, so are its writes.

Django does not know of these savepoints, so ``transaction.on_commit`` would keep a
callback registered inside one that rolled back. The engine registers its callbacks
through :func:`on_commit` instead (``store.database.on_commit`` does), which keeps
them with the innermost savepoint and hands them to Django when it is released:
dropped with it when it rolls back, in their order otherwise. Code that is not the
engine's runs in :func:`foreign`, inside a savepoint of Django's own when it runs
inside one of the engine's: its callbacks, its nested blocks and
``transaction.set_rollback()`` then mean what they mean anywhere else.

Elsewhere (SQLite, server-side binding, outside the engine's block) a savepoint is
Django's ``atomic()`` and a callback Django's ``on_commit``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Model

from durable_workflow.store import roundtrips

#: A callback, whether it is robust, and its database alias.
_Hook = tuple[Callable[[], Any], bool, str]


class _Open(threading.local):
    def __init__(self) -> None:
        #: Innermost last: an engine savepoint's callbacks, or ``None`` for a block
        #: Django manages (its callbacks go to Django).
        self.scopes: list[list[_Hook] | None] = []
        self.names = itertools.count(1)


_open = _Open()


@contextlib.contextmanager
def atomic(model: type[Model]) -> Iterator[None]:
    """``transaction.atomic()`` for ``model``'s database, with the engine's writes
    batched (``roundtrips.batched``); nested in the engine's block, :func:`savepoint`.

    When this is the outermost block (the usual case for a task), its last flush also
    carries the ``COMMIT``, so the driver has nothing left to send when Django commits.
    """
    if roundtrips.batching(model):
        with savepoint(model):
            yield
        return
    alias = router.db_for_write(model)
    conn = connections[alias]
    # Outermost and committing on exit: asked before entering, through public surface.
    outermost = not conn.in_atomic_block and transaction.get_autocommit(using=alias)
    with transaction.atomic(using=alias), roundtrips.batched(model, commit=outermost):
        yield


@contextlib.contextmanager
def savepoint(model: type[Model]) -> Iterator[None]:
    """A nested block undone on any exception (which goes on): like a nested
    ``atomic()`` on ``model``'s database, its savepoint held back with the engine's
    writes where those are."""
    conn = roundtrips.connection_for(model)
    if not roundtrips.batching(model):
        with transaction.atomic(using=conn.alias), _scope(None):
            yield
        return
    name = f"dw_{next(_open.names)}"
    point = roundtrips.mark()
    roundtrips.hold(conn, f"SAVEPOINT {name}")
    hooks: list[_Hook] = []
    try:
        with _scope(hooks):
            yield
    except BaseException:
        _undo(conn, name, point)
        raise
    if not roundtrips.take_back(point, f"SAVEPOINT {name}"):
        roundtrips.hold(conn, f"RELEASE SAVEPOINT {name}")
    for func, robust, using in hooks:
        on_commit(func, using=using, robust=robust)


def _undo(conn: Any, name: str, point: roundtrips.Mark) -> None:
    """Roll the savepoint back: nothing to send when it never left (its writes are
    forgotten with it); else its ``ROLLBACK TO SAVEPOINT`` goes first in the next
    query, which also brings back a transaction a failed statement inside it left
    failed (as Django's rollback would, one round trip later)."""
    if not roundtrips.drop_since(point):
        roundtrips.hold(conn, f"ROLLBACK TO SAVEPOINT {name}")


@contextlib.contextmanager
def foreign(model: type[Model]) -> Iterator[None]:
    """Around code that is not the engine's (a project's interceptors, say) inside the
    engine's block: what the engine held back goes first (``roundtrips.orm``); inside
    a :func:`savepoint` the code gets one of Django's own (whose exit sends what the
    engine held back inside it first), so that its ``set_rollback()`` undoes only
    what it did."""
    conn = roundtrips.connection_for(model)
    if not _open.scopes:
        with roundtrips.orm(), _scope(None):
            yield
        return
    with roundtrips.orm(), transaction.atomic(using=conn.alias), _scope(None):
        point = roundtrips.mark()
        try:
            yield
        except BaseException:
            roundtrips.drop_since(point)  # Django's savepoint rolls back what went
            raise
        if transaction.get_rollback(using=conn.alias):
            roundtrips.drop_since(point)  # set_rollback(): the same
        else:
            roundtrips.flush()


@contextlib.contextmanager
def _scope(hooks: list[_Hook] | None) -> Iterator[None]:
    _open.scopes.append(hooks)
    try:
        yield
    finally:
        _open.scopes.pop()


def on_commit(func: Callable[[], Any], *, using: str, robust: bool = False) -> None:
    """``transaction.on_commit(func)`` on ``using``, kept with the innermost of the
    engine's savepoints while one is open: it runs only if that savepoint, and every
    one around it, is released and the transaction commits."""
    if _open.scopes and _open.scopes[-1] is not None:
        _open.scopes[-1].append((func, robust, using))
        return
    transaction.on_commit(func, using=using, robust=robust)
