"""Which Celery queues the engine routes to, and which of them hold open work."""

from __future__ import annotations

from collections import defaultdict

from durable_workflow import registry
from durable_workflow.conf import get_settings
from durable_workflow.models import Task, TaskStatus
from durable_workflow.transport.celery import default_queue, effective_queue

Scope = tuple[str | None, str]  # (connection, queue)

__all__ = ["default_queue", "effective_queue"]


def configured_scopes() -> set[Scope]:
    """The default queue plus every queue a registered workflow or activity names."""
    scopes: set[Scope] = {(None, default_queue())}
    for connection in get_settings().CONNECTIONS:
        scopes.add((connection, default_queue(connection)))
    classes = [*registry.workflows().values(), *registry.activities().values()]
    for cls in classes:
        connection = getattr(cls, "connection", None)
        scopes.add((connection, effective_queue(getattr(cls, "queue", None), connection)))
    return scopes


def open_task_scopes() -> set[Scope]:
    """Queues that ready or leased tasks are routed to right now."""
    rows = (
        Task.objects.filter(status__in=(TaskStatus.READY, TaskStatus.LEASED))
        .values_list("connection", "queue")
        .distinct()
    )
    return {(connection, effective_queue(queue, connection)) for connection, queue in rows}


def by_connection(scopes: set[Scope]) -> dict[str | None, list[str]]:
    grouped: dict[str | None, set[str]] = defaultdict(set)
    for connection, queue in scopes:
        grouped[connection].add(queue)
    return {connection: sorted(queues) for connection, queues in grouped.items()}
