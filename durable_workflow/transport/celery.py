"""Celery tasks (fixed names) and the dispatch backend that publishes to them.

Messages carry one task id and nothing else; the database row is the truth.
The task names below are persisted in brokers' queues: never rename them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container
from typing import Any, NoReturn

from celery import Celery, current_app, shared_task
from celery.app import routes as celery_routes
from celery.exceptions import WorkerShutdown
from django import db
from django.utils.module_loading import import_string
from kombu.exceptions import ChannelError
from kombu.exceptions import OperationalError as KombuOperationalError

from durable_workflow.conf import get_settings
from durable_workflow.engine.failures import INTERRUPTS
from durable_workflow.exceptions import BrokerUnavailable, ConfigurationError
from durable_workflow.logs import get_logger
from durable_workflow.options import PRIORITY_MAX
from durable_workflow.store import connections
from durable_workflow.store.records import TaskRecord
from durable_workflow.transport import eager
from durable_workflow.transport.held import held as held_by_workers

logger = get_logger("durable_workflow")

WORKFLOW_TASK = "durable_workflow.workflow_task"
ACTIVITY_TASK = "durable_workflow.activity_task"
TIMER_TASK = "durable_workflow.timer_task"
REPAIR_TASK = "durable_workflow.repair"

TASK_NAMES = {"workflow": WORKFLOW_TASK, "activity": ACTIVITY_TASK, "timer": TIMER_TASK}


@functools.cache
def _named_app(path: str) -> Celery:
    app = import_string(path)
    if not isinstance(app, Celery):
        raise ConfigurationError(f"{path} is not a Celery app")
    return app


def celery_app(connection: str | None = None) -> Celery:
    """The Celery app for a connection name (``None``: the default app)."""
    settings = get_settings()
    if connection:
        try:
            return _named_app(settings.CONNECTIONS[connection])
        except KeyError:
            raise ConfigurationError(
                f"connection {connection!r} is not in DURABLE_WORKFLOW['CONNECTIONS']"
            ) from None
    if settings.CELERY_APP:
        return _named_app(settings.CELERY_APP)
    # celery-types declares current_app a Celery; it is a Proxy, resolved here to the app.
    return current_app._get_current_object()  # type: ignore[attr-defined,no-any-return]


def is_eager(connection: str | None) -> bool:
    """Does the Celery app of ``connection`` run tasks eagerly (``transport/eager.py``)?"""
    return bool(celery_app(connection).conf.task_always_eager)


def default_queue(connection: str | None = None) -> str:
    """The queue a task with no queue of its own lands on."""
    configured = get_settings().DEFAULT_QUEUE
    if configured:
        return configured
    return str(celery_app(connection).conf.task_default_queue or "celery")


def effective_queue(
    queue: str | None, connection: str | None = None, task_type: str | None = None
) -> str:
    """The queue a message of the engine's ``task_type`` lands on, resolved the way Celery
    resolves it: the task's own queue, else the app's ``task_routes`` for the task's
    name, else the app's ``task_default_queue``. Without a ``task_type`` (a caller that
    cannot tell), the engine's ``DEFAULT_QUEUE`` or Celery's default."""
    if queue:
        return queue
    if task_type is None:
        return default_queue(connection)
    return routed_queue(TASK_NAMES[task_type], connection)


def routed_queue(name: str, connection: str | None = None) -> str:
    """Where Celery sends a message of the task ``name`` that names no queue."""
    app = celery_app(connection)
    route = _route(app, name)
    if isinstance(route, str):
        return route
    if isinstance(route, dict):
        queue = route.get("queue") or route.get("routing_key")
        if queue:
            return str(getattr(queue, "name", queue))
    return str(app.conf.task_default_queue or "celery")


def _route(app: Celery, name: str) -> Any:
    """The first ``task_routes`` entry that routes ``name`` (``None``: no route does).
    Read from the configuration each time, as a new Celery router would."""
    if not app.conf.task_routes:
        return None
    router = celery_routes.Router(celery_routes.prepare(app.conf.task_routes), app=app)
    try:
        # celery-types wants a Task class here; Celery itself passes the task (send_task).
        return router.lookup_route(name, (), {}, {}, app.tasks.get(name))  # type: ignore[arg-type]
    except Exception:  # a router function that needs the message's arguments
        logger.debug("could not resolve the route of %s", name, exc_info=True)
        return None


class CeleryBackend:
    """Publishes one message per task, routed by the task's queue and connection."""

    def waiting(self, task: TaskRecord) -> int | None:
        """Messages waiting ahead in the queue ``task``'s message goes to."""
        if is_eager(task.connection):
            return 0  # nothing is ever published
        queue = effective_queue(task.queue, task.connection, task.task_type)
        return waiting(queue, task.connection)

    def held(self, task: TaskRecord) -> Container[str] | None:
        """The ids of the tasks whose messages workers of ``task``'s broker have taken
        and not acknowledged yet (``transport/held.py``; ``None``: it can never say,
        ``held.UNREAD``: it can but the read failed)."""
        if is_eager(task.connection):
            return frozenset()
        return held_by_workers(celery_app(task.connection))

    def send(self, task: TaskRecord, countdown: float | None) -> None:
        if is_eager(task.connection):
            eager.run(task, countdown)
            return
        options: dict[str, Any] = {}
        if task.queue:
            options["queue"] = task.queue
        priority = message_priority(task, celery_app(task.connection))
        if priority is not None:
            options["priority"] = priority
        if countdown:
            # Long broker countdowns are unsafe (Redis redelivers them after its
            # visibility timeout); the timer task re-arms itself if woken early.
            options["countdown"] = min(countdown, get_settings().TIMER_MAX_COUNTDOWN_SECONDS)
        try:
            celery_app(task.connection).send_task(
                TASK_NAMES[task.task_type], args=[str(task.id)], **options
            )
        except (KombuOperationalError, ConnectionError) as exc:
            raise BrokerUnavailable(f"the broker cannot be reached: {exc}") from exc


def message_priority(task: TaskRecord, app: Celery) -> int | None:
    """The Celery message priority of an activity task (``None``: leave it unset).

    Redis serves lower numbers first, as our priorities read (0 first, 9 last); AMQP
    brokers serve higher numbers first (and only on a queue declared with
    ``x-max-priority``), so the scale is turned over for them. Other transports and
    workflow or timer tasks get none.
    """
    if task.task_type != "activity":
        return None
    transport = str(getattr(app.conf, "broker_url", None) or "").split("://", 1)[0]
    if transport in ("redis", "rediss", "sentinel"):
        return task.priority
    if transport in ("amqp", "amqps", "pyamqp", "librabbitmq"):
        return PRIORITY_MAX - task.priority
    return None


def waiting(queue: str, connection: str | None = None) -> int | None:
    """Messages waiting in ``queue`` on the broker (``None``: the broker cannot say).
    Messages workers have taken and not acknowledged are not counted (``held``).

    Kombu's virtual transports (Redis, SQS, ...) count a queue's messages themselves
    (``_size``; their passive declare misses a queue under a ``global_keyprefix``); on
    AMQP a passive declare reads the count and creates nothing, and a queue the
    broker does not know holds nothing.
    """
    try:
        with celery_app(connection).connection_for_read() as conn:
            channel: Any = conn.default_channel  # the transport's own channel class
            if hasattr(channel, "_size"):
                return int(channel._size(queue))
            try:
                return int(channel.queue_declare(queue=queue, passive=True)[1])
            except ChannelError:
                return 0
    except Exception:  # unreachable, or a transport that cannot count
        logger.debug("could not count the messages waiting in %s", queue, exc_info=True)
        return None


def beat_schedule() -> dict[str, dict[str, Any]]:
    """An entry for ``app.conf.beat_schedule`` that runs the repair pass."""
    return {
        "durable-workflow-repair": {
            "task": REPAIR_TASK,
            "schedule": float(get_settings().REPAIR_INTERVAL_SECONDS),
            "options": {"expires": float(get_settings().REPAIR_INTERVAL_SECONDS) * 2},
        }
    }


#: Errors that say the database or the broker failed, not the task's own code.
INFRASTRUCTURE_ERRORS = (
    db.OperationalError,
    db.InterfaceError,
    BrokerUnavailable,
    KombuOperationalError,
    ConnectionError,
)


#: Outcomes that show nothing about the worker's health: the message found nothing to
#: do here (taken already, held for its sticky owner, meant for another build).
_NEUTRAL = frozenset({"skipped", "held", "incompatible", "stale", "busy"})


def _entry_point(run: Callable[[], str]) -> str:
    """Run one engine task between two looks at this thread's connections.

    A connection the server dropped is discarded before and after every task, whatever
    ``CELERY_DB_REUSE_MAX`` says (Celery's fixup skips that look when it is set); and
    the outcome tells the worker's health, which routing reads: a task that failed on
    a database or broker error counts against it, one that did its work for it.
    """
    from durable_workflow.transport.worker import health

    connections.discard_broken()
    try:
        outcome = run()
    except INTERRUPTS as exc:
        _stop_worker(exc)
    except INFRASTRUCTURE_ERRORS as exc:
        health.task_done(exc)
        raise
    except Exception:
        health.task_done(None)  # the code failed, not the infrastructure
        raise
    else:
        if outcome not in _NEUTRAL:
            health.task_done(None)
        return outcome
    finally:
        connections.discard_broken()


def _stop_worker(exc: BaseException) -> NoReturn:
    """A ``KeyboardInterrupt`` or ``SystemExit`` in workflow or activity code: nothing
    failed and no worker was lost. The engine put the task back as it was; this worker
    shuts down cleanly (``WorkerShutdown``: a warm shutdown, not a lost process) and
    another one runs the task."""
    if isinstance(exc, WorkerShutdown):
        raise exc
    logger.warning(
        "%s raised in a task: this worker shuts down, the task runs again elsewhere",
        type(exc).__name__,
    )
    code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
    raise WorkerShutdown(code) from exc


def _redelivered(task: Any) -> bool:
    """Is ``task``'s current message a redelivery (an earlier delivery may have died
    with it)?"""
    info = getattr(task.request, "delivery_info", None) or {}
    return bool(info.get("redelivered"))


@shared_task(name=WORKFLOW_TASK, acks_late=True, ignore_result=True, reject_on_worker_lost=True)
def workflow_task(task_id: str) -> str:
    from durable_workflow.executor import run_workflow_task

    redelivered = _redelivered(workflow_task)
    return _entry_point(lambda: run_workflow_task(task_id, redelivered=redelivered))


@shared_task(name=ACTIVITY_TASK, acks_late=True, ignore_result=True, reject_on_worker_lost=True)
def activity_task(task_id: str) -> str:
    from durable_workflow.executor import run_activity_task

    return _entry_point(lambda: run_activity_task(task_id))


@shared_task(name=TIMER_TASK, acks_late=True, ignore_result=True, reject_on_worker_lost=True)
def timer_task(task_id: str) -> str:
    from durable_workflow.executor import run_timer_task

    redelivered = _redelivered(timer_task)
    return _entry_point(lambda: run_timer_task(task_id, redelivered=redelivered))


@shared_task(name=REPAIR_TASK, ignore_result=True)
def repair() -> dict[str, int]:
    from durable_workflow.executor import repair_pass

    connections.discard_broken()
    try:
        return repair_pass().as_dict()
    finally:
        connections.discard_broken()
