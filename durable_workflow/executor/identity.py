"""Who this process is to the engine: the lease owner it writes, the Celery node it
belongs to and, in a registered worker, the direct queue that reaches it.

Worker registration (``transport/worker.py``) sets both; leases, sticky routing and
worker sessions read them here. Nothing else keeps a copy.
"""

from __future__ import annotations

import functools
import os
import socket

from durable_workflow.conf import get_settings

_registered: dict[str, str | None] = {"worker_id": None, "direct_queue": None, "node": None}
_getpid = getattr(os.getpid, "__wrapped__", os.getpid)  # several times a step: past the guards


def set_registered_worker_id(value: str | None, *, direct_queue: str | None = None) -> None:
    """Called by worker registration (``None`` on deregistration), so leases name the
    registered worker and sticky or in-session tasks can be sent to ``direct_queue``."""
    _registered["worker_id"] = value
    _registered["direct_queue"] = direct_queue if value else None


def registered_worker_id() -> str | None:
    """This process's worker registration id (``None`` outside a registered worker)."""
    return _registered["worker_id"]


def direct_queue() -> str | None:
    """The queue only this registered worker consumes (``None``: not a worker, or its
    transport cannot route to one worker)."""
    return _registered["direct_queue"]


def set_node_name(value: str | None) -> None:
    """Called by the worker's setup (before a prefork pool forks) with the Celery node
    name: per-worker queue limits count the leases of a node, all its processes."""
    _registered["node"] = value


def node_name() -> str:
    """The worker node this process belongs to (outside a Celery worker: the process)."""
    return _registered["node"] or worker_id()


def worker_id() -> str:
    """The lease owner this process writes: its registration id when it has one."""
    return get_settings().WORKER_ID or _registered["worker_id"] or _host_and_pid(_getpid())


@functools.lru_cache(maxsize=4)
def _host_and_pid(pid: int) -> str:
    """``host:pid`` (by pid, so a forked worker names itself, not its parent)."""
    return f"{socket.gethostname()}:{pid}"
