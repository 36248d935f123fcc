"""Publishing task messages, only once the transaction that made the task commits.

The backend is pluggable: Celery in production, the inline executor of the
testing kit in fake mode. Messages only carry the task id; the row decides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Protocol

from django.db import transaction

from durable_workflow import clock
from durable_workflow.store.records import TaskRecord


class Backend(Protocol):
    def send(self, task: TaskRecord, countdown: float | None) -> None: ...


_backend: Backend | None = None


def set_backend(backend: Backend | None) -> Backend | None:
    """Install a dispatch backend (``None`` restores the Celery default)."""
    global _backend
    previous, _backend = _backend, backend
    return previous


def backend() -> Backend:
    if _backend is None:
        from durable_workflow.transport.celery import CeleryBackend

        set_backend(CeleryBackend())
    assert _backend is not None
    return _backend


def countdown_for(available_at: dt.datetime, *, now: dt.datetime | None = None) -> float | None:
    delay = (available_at - (now or clock.now())).total_seconds()
    return delay if delay > 0 else None


def enqueue(task: TaskRecord) -> None:
    """Send the task's message after commit (at once outside a transaction)."""
    send: Callable[[], None] = lambda: backend().send(task, countdown_for(task.available_at))  # noqa: E731
    transaction.on_commit(send, robust=True)
