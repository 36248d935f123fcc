"""Publishing task messages, only once the transaction that made the task commits.

The backend is pluggable: the app's ``ready()`` installs the one
``DURABLE_WORKFLOW['DISPATCH_BACKEND']`` names (Celery by default), and the testing
kit's fake mode swaps in its inline backend for a while. Messages only carry the task
id; the row decides.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Protocol

from django.utils.module_loading import import_string

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.store import database
from durable_workflow.store.records import TaskRecord


class Backend(Protocol):
    def send(self, task: TaskRecord, countdown: float | None) -> None:
        """Publish one message; ``BrokerUnavailable`` when the broker cannot be reached."""


_configured: Backend | None = None  # the deployment's, from the settings
_backend: Backend | None = None  # one installed over it for a while (the testing kit)


def configure_from_settings() -> Backend:
    """Build and install the backend ``DISPATCH_BACKEND`` names; called from ``ready()``."""
    global _configured
    path = get_settings().DISPATCH_BACKEND
    try:
        factory = import_string(path)
    except ImportError as exc:
        raise ConfigurationError(f"DURABLE_WORKFLOW['DISPATCH_BACKEND']: {exc}") from None
    built: Backend = factory()
    if not callable(getattr(built, "send", None)):
        raise ConfigurationError(
            f"DURABLE_WORKFLOW['DISPATCH_BACKEND'] {path!r} has no send(task, countdown) method"
        )
    _configured = built
    return built


def set_backend(backend: Backend | None) -> Backend | None:
    """Install a dispatch backend over the configured one (``None`` restores that);
    returns the one it replaces, for restoring it."""
    global _backend
    previous, _backend = _backend, backend
    return previous


def backend() -> Backend:
    current = _backend or _configured
    if current is None:
        raise ConfigurationError(
            "no dispatch backend: the durable_workflow app is not ready "
            "(is it in INSTALLED_APPS, and was django.setup() called?)"
        )
    return current


def countdown_for(available_at: dt.datetime, *, now: dt.datetime | None = None) -> float | None:
    delay = (available_at - (now or clock.now())).total_seconds()
    return delay if delay > 0 else None


def enqueue(task: TaskRecord, *, queue: str | None = None, delay: float | None = None) -> None:
    """Send the task's message after commit (at once outside a transaction).

    ``queue`` overrides the task's own queue (a worker's direct queue); otherwise
    an in-session activity goes to its session holder's direct queue if it has one.
    """
    task = routed(task, queue)
    countdown = delay if delay is not None else countdown_for(task.available_at)
    send: Callable[[], None] = lambda: backend().send(task, countdown)  # noqa: E731
    database.on_commit(send, robust=True)


def routed(task: TaskRecord, queue: str | None = None) -> TaskRecord:
    """``task`` with the queue its message should go to now."""
    queue = queue or _direct_queue(task)
    if queue and queue != task.queue:
        return dataclasses.replace(task, queue=queue)
    return task


#: Where a task's message goes instead of its own queue, asked in order until one answers:
#: sticky routing (``affinity``) and worker sessions (``sessions``) add theirs when they
#: are imported (the app's ``ready()`` imports both), so this module imports neither.
_routers: list[Callable[[TaskRecord, dt.datetime], str | None]] = []


def add_router(router: Callable[[TaskRecord, dt.datetime], str | None]) -> None:
    """Ask ``router(task, now)`` for a direct queue for each message from now on."""
    if router not in _routers:
        _routers.append(router)


def _direct_queue(task: TaskRecord) -> str | None:
    now = clock.now()
    for router in _routers:
        queue = router(task, now)
        if queue:
            return queue
    return None
