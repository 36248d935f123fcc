"""The engine's database in tests: what ``django.db.connection`` is to ``default``.

The engine's tables are on ``default`` unless a router sends them elsewhere (with
``DW_TEST_ROUTED=1`` they are on ``workflows``: tests/settings.py). Tests that watch
or hold the engine's statements (execute wrappers, cursors, locks held from another
thread, killed backends) use this connection and ``database.atomic()``.
"""

from __future__ import annotations

from typing import Any

from durable_workflow.store import database


class _EngineConnection:
    """This thread's connection to the engine's database, looked up on every use."""

    def __getattr__(self, name: str) -> Any:
        return getattr(database.connection(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(database.connection(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(database.connection(), name)


connection: Any = _EngineConnection()
