"""Which Celery queues the engine's tasks go to, and which of them hold open work.

Each task's queue is resolved the way Celery will resolve it when the message is
published (:func:`durable_workflow.transport.celery.effective_queue`): the task's own
queue, else the app's ``task_routes`` for the engine's task name, else the app's
default queue. Reports group by that resolved queue.
"""

from __future__ import annotations

from collections import defaultdict

from durable_workflow import registry
from durable_workflow.conf import get_settings
from durable_workflow.models import Task, TaskStatus
from durable_workflow.transport.celery import TASK_NAMES, default_queue, effective_queue

Scope = tuple[str | None, str]  # (connection, queue)

__all__ = ["default_queue", "effective_queue"]

#: The task types whose messages a workflow class's queue decides (its timers follow it).
_WORKFLOW_TASKS = ("workflow", "timer")


def configured_scopes() -> set[Scope]:
    """The queues the engine's messages go to for the registered workflows and
    activities, and for work that names no queue of its own."""
    fallback = get_settings().DEFAULT_QUEUE
    scopes: set[Scope] = set()
    for connection in [None, *get_settings().CONNECTIONS]:
        for task_type in TASK_NAMES:
            scopes.add((connection, effective_queue(fallback, connection, task_type)))
    for cls in registry.workflows().values():
        connection = getattr(cls, "connection", None)
        queue = getattr(cls, "queue", None) or fallback
        for task_type in _WORKFLOW_TASKS:
            scopes.add((connection, effective_queue(queue, connection, task_type)))
    for cls in registry.activities().values():
        connection = getattr(cls, "connection", None)
        queue = getattr(cls, "queue", None) or fallback
        scopes.add((connection, effective_queue(queue, connection, "activity")))
    return scopes


def open_task_scopes() -> set[Scope]:
    """Queues that ready or leased tasks are routed to right now."""
    rows = (
        Task.objects.filter(status__in=(TaskStatus.READY, TaskStatus.LEASED))
        .order_by()
        .values_list("connection", "queue", "task_type")
        .distinct()
    )
    return {
        (connection, effective_queue(queue, connection, task_type))
        for connection, queue, task_type in rows
    }


def by_connection(scopes: set[Scope]) -> dict[str | None, list[str]]:
    grouped: dict[str | None, set[str]] = defaultdict(set)
    for connection, queue in scopes:
        grouped[connection].add(queue)
    return {connection: sorted(queues) for connection, queues in grouped.items()}
