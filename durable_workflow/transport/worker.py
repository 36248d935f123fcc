"""Worker registration: each Celery worker process says who it is, and keeps saying it.

Connected to Celery's worker signals when the app is ready. A process registers
when it can run tasks (a prefork child at ``worker_process_init``; the main
process of a solo or thread pool at ``worker_ready``), heartbeats from a daemon
thread, and deregisters on a warm shutdown. A registration silent for
``WORKER_STALE_AFTER_SECONDS`` counts as gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import threading
import uuid
from typing import Any

from celery import signals
from django.db import close_old_connections

from durable_workflow import clock
from durable_workflow.compatibility import local_markers
from durable_workflow.conf import get_settings
from durable_workflow.executor.identity import set_node_name, set_registered_worker_id
from durable_workflow.logs import get_logger
from durable_workflow.store.connections import close_thread_connections

logger = get_logger("durable_workflow")

_state: dict[str, Any] = {"worker_id": None, "queues": [], "stop": None}


class _Health:
    """Whether this process's tasks get done: what its heartbeat reports besides being alive.

    ``failing_since`` is set once ``WORKER_UNHEALTHY_AFTER_FAILURES`` tasks in a row
    failed on database or broker errors, and cleared by the next task that does not.
    A change wakes the heartbeat thread, so routing learns it at once.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures = 0
        self.failing_since: Any = None
        self.changed = threading.Event()

    def task_done(self, infrastructure_error: BaseException | None) -> None:
        with self.lock:
            if infrastructure_error is None:
                recovered, self.failures = self.failing_since is not None, 0
                self.failing_since = None
                if recovered:
                    logger.warning("worker tasks succeed again; routable again")
                    self.changed.set()
                return
            self.failures += 1
            limit = max(1, get_settings().WORKER_UNHEALTHY_AFTER_FAILURES)
            if self.failing_since is None and self.failures >= limit:
                self.failing_since = clock.now()
                logger.error(
                    "%s tasks in a row failed on infrastructure errors (last: %s: %s); "
                    "this worker is no routing target until a task succeeds",
                    self.failures,
                    type(infrastructure_error).__name__,
                    infrastructure_error,
                )
                self.changed.set()


health = _Health()


def _sticky_snapshot() -> dict[str, Any]:
    from durable_workflow.executor import sticky

    return sticky.cache.snapshot()


def register(queues: list[str]) -> str:
    from durable_workflow.store import dbclock, workers

    dbclock.follow_database_clock()  # due decisions in the database's time from here on
    settings = get_settings()
    worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    workers.register(
        worker_id=worker_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=sorted(set(queues)),
        capabilities=list(settings.WORKER_CAPABILITIES),
        max_concurrent_worker_sessions=settings.MAX_CONCURRENT_WORKER_SESSIONS,
        sticky_cache=_sticky_snapshot(),
        now=clock.now(),
        direct_queue=_state.get("direct_queue"),
        compatibility=list(local_markers()),
    )
    _state.update(worker_id=worker_id, queues=queues)
    set_registered_worker_id(worker_id, direct_queue=_state.get("direct_queue"))
    _start_heartbeat(worker_id)
    logger.info("registered worker %s on queues %s", worker_id, ", ".join(queues))
    return worker_id


def _start_heartbeat(worker_id: str) -> None:
    stop = threading.Event()
    _state["stop"] = stop

    def beat() -> None:
        from durable_workflow.store import dbclock, workers

        interval = max(get_settings().WORKER_HEARTBEAT_SECONDS, 0.2)
        while not stop.is_set():
            health.changed.wait(interval)  # early when the process's health changed
            health.changed.clear()
            if stop.is_set():
                return
            try:
                close_old_connections()
                dbclock.follow_database_clock()
                workers.heartbeat(
                    worker_id,
                    sticky_cache=_sticky_snapshot(),
                    now=clock.now(),
                    failing_since=health.failing_since,
                )
            except Exception:  # a missed beat is tolerated; the next one may succeed
                logger.warning("worker heartbeat failed", exc_info=True)
            finally:
                close_thread_connections()

    threading.Thread(target=beat, name="durable-workflow-heartbeat", daemon=True).start()


def deregister() -> None:
    from durable_workflow.store import workers

    worker_id = _state.get("worker_id")
    if not worker_id:
        return
    if _state.get("stop") is not None:
        _state["stop"].set()
    try:
        close_sessions(worker_id)
        workers.deregister(worker_id, now=clock.now())
    finally:
        _state.update(worker_id=None, stop=None)
        set_registered_worker_id(None)


def close_sessions(worker_id: str) -> None:
    """A planned shutdown hands back the worker sessions this process holds."""
    from durable_workflow.executor import sessions

    try:
        closed = sessions.close_held_by(worker_id)
    except Exception:
        logger.warning("could not close the worker sessions of %s", worker_id, exc_info=True)
        return
    if closed:
        logger.info("closed worker sessions %s on shutdown", ", ".join(closed))


def direct_queue_name(nodename: str) -> str:
    """The queue only one Celery node consumes: sticky and in-session tasks go there.

    Letters, digits, ``-`` and ``_`` only, at most 80 characters, so that every Kombu
    transport accepts it (SQS is the strictest; the filesystem transport refuses the
    ``@`` of a node name). The node name, made safe and cut short, keeps it readable;
    a digest of the whole name keeps two nodes apart.
    """
    readable = _UNSAFE_IN_QUEUE_NAMES.sub("-", nodename).strip("-")[:56]
    digest = hashlib.sha256(nodename.encode()).hexdigest()[:12]
    return f"dw-direct-{readable}-{digest}"


_UNSAFE_IN_QUEUE_NAMES = re.compile(r"[^A-Za-z0-9_-]+")


def _queue_names(consumer: Any) -> list[str]:
    try:
        return [q.name for q in consumer.task_consumer.queues]
    except AttributeError:
        return []


def _on_after_setup(sender: Any = None, instance: Any = None, **kwargs: Any) -> None:
    """Learn the queues before the pool forks, so prefork children inherit them."""
    with contextlib.suppress(AttributeError):
        _state["queues"] = sorted(instance.app.amqp.queues.consume_from)
    if sender:
        _state["direct_queue"] = direct_queue_name(str(sender))
        set_node_name(str(sender))


def _on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    pool = str(getattr(getattr(sender, "controller", None), "pool_cls", "") or "")
    queues = _queue_names(sender) or list(_state.get("queues") or [])
    _state["queues"] = queues
    direct = _state.get("direct_queue")
    if direct and direct not in queues:
        try:
            sender.add_task_queue(direct)
        except Exception as exc:  # no direct routing then: tasks still reach the shared queues
            # One line: a transport that cannot route to one node is a limit, not a crash.
            logger.warning(
                "this transport cannot route to one worker (direct queue %s: %s); sticky "
                "and worker-session tasks go through the shared queues instead",
                direct,
                exc,
            )
            _state["direct_queue"] = None
    if "prefork" in pool.lower() or "processes" in pool.lower():
        return  # children register themselves
    register(queues)


def _on_process_init(**kwargs: Any) -> None:
    _state["pending_child"] = True


def _on_task_prerun(**kwargs: Any) -> None:
    # A prefork child learns its queues from the parent only once it runs: register
    # lazily on its first task.
    if _state.pop("pending_child", False) and not _state.get("worker_id"):
        register(list(_state.get("queues") or []))


def _on_shutdown(**kwargs: Any) -> None:
    try:
        deregister()
    except Exception:
        logger.warning("could not deregister worker", exc_info=True)


def connect() -> None:
    """Hook registration into Celery's worker lifecycle (idempotent)."""
    if _state.get("connected") or not get_settings().WORKER_REGISTRATION:
        return
    _state["connected"] = True
    signals.celeryd_after_setup.connect(_on_after_setup, weak=False)
    signals.worker_ready.connect(_on_worker_ready, weak=False)
    signals.worker_process_init.connect(_on_process_init, weak=False)
    signals.task_prerun.connect(_on_task_prerun, weak=False)
    signals.worker_process_shutdown.connect(_on_shutdown, weak=False)
    signals.worker_shutdown.connect(_on_shutdown, weak=False)
