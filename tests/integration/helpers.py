"""Small helpers shared by integration tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.db import connections
from django.test import override_settings

from durable_workflow import WorkflowStub, clock
from durable_workflow.models import Task, WorkflowFailure
from durable_workflow.store import database, workers
from durable_workflow.store.records import TaskRecord


def event_types(stub: WorkflowStub) -> list[str]:
    return [event.event_type for event in stub.history()]


def events_of(stub: WorkflowStub, event_type: str) -> list[dict[str, Any]]:
    return [event.payload for event in stub.history() if event.event_type == event_type]


def failures(stub: WorkflowStub) -> list[WorkflowFailure]:
    return list(WorkflowFailure.objects.filter(run_id=stub.run_id()).order_by("created_at"))


def tasks_of(stub: WorkflowStub, task_type: str | None = None) -> list[Task]:
    rows = Task.objects.filter(run_id=stub.run_id()).order_by("created_at")
    if task_type:
        rows = rows.filter(task_type=task_type)
    return list(rows)


def built_task(run_id: Any, **fields: Any) -> Any:
    """An unsaved activity task of the run (``store.tasks.build_task``), ready to insert."""
    from durable_workflow.store import tasks

    values: dict[str, Any] = {
        "run_id": run_id,
        "namespace": "default",
        "task_type": "activity",
        "available_at": clock.now(),
        "queue": "celery",
        "connection": None,
        "now": clock.now(),
        "compatibility": None,
        **fields,
    }
    return tasks.build_task(**values)


def start(workflow: str, instance_id: str, *args: Any) -> WorkflowStub:
    stub = WorkflowStub.make(workflow, instance_id)
    stub.start(*args)
    return stub


@contextlib.contextmanager
def build(current: str | None, *supported: str, **more: Any) -> Iterator[None]:
    """Run the block as a process of another build: its compatibility markers (and
    any other ``DURABLE_WORKFLOW`` keys given)."""
    dw = {
        **settings.DURABLE_WORKFLOW,
        "COMPATIBILITY_CURRENT": current,
        "COMPATIBILITY_SUPPORTED": list(supported),
        **more,
    }
    with override_settings(DURABLE_WORKFLOW=dw):
        yield


def register_worker(
    worker_id: str,
    supported: list[str] | tuple[str, ...] = (),
    queues: list[str] | None = None,
    *,
    capabilities: list[str] | tuple[str, ...] = (),
    max_sessions: int = 0,
    direct_queue: str | None = None,
) -> None:
    """A live registration of a worker elsewhere: its markers, queues, capabilities,
    session capacity, and its node's direct queue (default ``dw.direct.<worker_id>``:
    a node of its own)."""
    workers.register(
        worker_id=worker_id,
        hostname="elsewhere",
        pid=1,
        queues=["celery"] if queues is None else queues,
        capabilities=list(capabilities),
        max_concurrent_worker_sessions=max_sessions,
        sticky_cache={},
        now=clock.now(),
        compatibility=list(supported),
        direct_queue=direct_queue or f"dw.direct.{worker_id}",
    )


class Recorder:
    """A dispatch backend that only records (task type, queue, countdown) per message."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None, float | None]] = []

    def send(self, task: TaskRecord, countdown: float | None) -> None:
        self.sent.append((task.task_type, task.queue, countdown))


def doc_block(page: str, language: str, containing: str) -> str:
    """The one fenced ``language`` block of ``docs/<page>`` that contains ``containing``."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / page).read_text("utf-8")
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)
    found = [block for block in blocks if containing in block]
    assert len(found) == 1, f"{len(found)} {language} blocks of {page} contain {containing!r}"
    return found[0]


def terminate_backend(pid: int) -> None:
    """``pg_terminate_backend`` of one backend of this test (never another session's),
    from a connection of its own."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def distinct_reads(call: Callable[[], object]) -> list[tuple[str, int]]:
    """Runs ``call``; each ``SELECT DISTINCT`` it made, with the rows it sends back
    (counted by running it again: SQLite reports no row count for a SELECT)."""
    made: list[tuple[str, Any]] = []

    def note(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("SELECT DISTINCT"):
            made.append((sql, params))
        return execute(sql, params, many, context)

    alias = database.alias()  # the engine's tables may be on a database of their own
    with connections[alias].execute_wrapper(note):
        call()
    reads = []
    with connections[alias].cursor() as cursor:
        for sql, params in made:
            cursor.execute(sql, params)
            reads.append((sql, len(cursor.fetchall())))
    return reads
