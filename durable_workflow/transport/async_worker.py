"""A Celery worker process runs async activities on an event loop of its own.

Connected to Celery's worker signals when the app is ready: a worker process (the
main one of a solo or thread pool, each prefork child) sends its async attempts
to its loop; stopping the process hands back those still running
(``executor.async_attempts``).
"""

from __future__ import annotations

from typing import Any

from celery import signals

from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

_state = {"connected": False}


def _on_init(**kwargs: Any) -> None:
    from durable_workflow.executor import async_attempts

    async_attempts.in_worker()


def _on_shutdown(**kwargs: Any) -> None:
    from durable_workflow.executor import async_attempts

    try:
        async_attempts.shutdown()
    except Exception:
        logger.warning("could not hand back the async activity attempts", exc_info=True)


def connect() -> None:
    """Hook the event loop into Celery's worker lifecycle (idempotent)."""
    if _state["connected"]:
        return
    _state["connected"] = True
    signals.worker_init.connect(_on_init, weak=False)
    signals.worker_process_init.connect(_on_init, weak=False)
    signals.worker_process_shutdown.connect(_on_shutdown, weak=False)
    signals.worker_shutdown.connect(_on_shutdown, weak=False)
