"""The one database the engine's tables live on, and its transactions.

A project may keep the engine's tables apart from its own (``DATABASES`` with a
second alias and a ``DATABASE_ROUTERS`` entry sending the ``durable_workflow`` app
there). The engine then opens every transaction, takes every lock, runs every raw
statement and registers every ``on_commit`` callback on that alias: the one the
router gives its models for writing. Calling ``transaction.atomic()`` bare would
open the transaction on ``default`` while the queries go elsewhere (Django refuses
``select_for_update`` outside a transaction), and ``transaction.on_commit`` bare
would fire on ``default``'s commit, before the engine's rows are visible.

All of the engine's models must share the alias (the ``durable_workflow.E030``
check says so when a router splits them): one engine transaction spans several
of its tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections, router, transaction

from durable_workflow.store import savepoints

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper


def alias() -> str:
    """The alias the router gives the engine's models for writing (``default`` when no
    router has an opinion)."""
    from durable_workflow.models import WorkflowRun

    return router.db_for_write(WorkflowRun) or DEFAULT_DB_ALIAS


def atomic(
    *, savepoint: bool = True, durable: bool = False
) -> contextlib.AbstractContextManager[None]:
    """``transaction.atomic()`` on the engine's database; nested in the engine's own
    batched block, the engine's savepoint (:func:`durable_workflow.store.savepoints.savepoint`),
    whose statements wait with the engine's writes."""
    from durable_workflow.models import WorkflowRun
    from durable_workflow.store import roundtrips

    if savepoint and not durable and roundtrips.batching(WorkflowRun):
        return savepoints.savepoint(WorkflowRun)
    return transaction.atomic(using=alias(), savepoint=savepoint, durable=durable)


def on_commit(func: Callable[[], Any], *, robust: bool = False) -> None:
    """Run ``func`` once the engine's current transaction commits (at once outside one);
    registered inside one of the engine's savepoints, only if that is released
    (:func:`durable_workflow.store.savepoints.on_commit`)."""
    savepoints.on_commit(func, using=alias(), robust=robust)


def connection() -> BaseDatabaseWrapper:
    """This thread's connection to the engine's database."""
    return connections[alias()]


def in_transaction() -> bool:
    """Is an atomic block open on the engine's database?"""
    return bool(connection().in_atomic_block)


def routing_problems() -> list[str]:
    """What the project's routers do that the engine cannot work with: its models
    written to more than one alias, read from another alias than they are written to,
    or not migrated where they are written."""
    from django.apps import apps

    models = list(apps.get_app_config("durable_workflow").get_models())
    writes = {m: router.db_for_write(m) or DEFAULT_DB_ALIAS for m in models}
    engine = alias()
    problems = []
    elsewhere = sorted(f"{m.__name__} on {a!r}" for m, a in writes.items() if a != engine)
    if elsewhere:
        problems.append(
            f"the engine's tables are written to more than one database: WorkflowRun on "
            f"{engine!r}, {', '.join(elsewhere)}"
        )
    for model, written in sorted(writes.items(), key=lambda item: item[0].__name__):
        read = router.db_for_read(model) or DEFAULT_DB_ALIAS
        if read != written:
            problems.append(
                f"{model.__name__} reads go to {read!r} but writes to {written!r} "
                "(the engine reads what it just wrote, under its locks)"
            )
            break
    missing = sorted(m.__name__ for m, a in writes.items() if not router.allow_migrate_model(a, m))
    if missing:
        problems.append(
            f"the router does not migrate {', '.join(missing)} on {engine!r}, "
            "where the engine writes them"
        )
    return problems
