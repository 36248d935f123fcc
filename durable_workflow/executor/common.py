"""Pieces every executor entry point shares."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import django.db
from django.db import DatabaseError, OperationalError, connections

from durable_workflow.conf import get_settings
from durable_workflow.engine import guards
from durable_workflow.engine.limits import warn_if_near
from durable_workflow.engine.runtime import current_runtime
from durable_workflow.exceptions import StructuralLimitExceeded, WorkflowOrmAccessError
from durable_workflow.executor import affinity, dispatch
from durable_workflow.logs import get_logger
from durable_workflow.models import RunStatus, TaskType
from durable_workflow.store import prepared, tasks
from durable_workflow.store.records import RunRecord

logger = get_logger("durable_workflow")

P = ParamSpec("P")
R = TypeVar("R")


def retry_transaction(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a whole transaction again when the database asks for it.

    SQLite reports "database is locked" as the expected answer to two writers
    at once (retried with back-off, ``DATABASE_LOCKED_RETRIES`` times). On
    PostgreSQL a prepared statement this process recorded may have gone (a
    ``DISCARD ALL``, a pooler that switched sessions): that is retried once, at
    once, after :mod:`durable_workflow.store.prepared` has forgotten what it knew.
    Either way the transaction rolled back whole, so running it again is safe.

    Only the outermost transaction is run again. Called inside another one (a child
    started from a workflow task), ``fn`` runs once and its error goes up: the outer
    transaction is aborted by then, and running ``fn`` again inside it would only
    fail again with ``savepoint ... does not exist``, hiding the real error.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if _in_transaction():
            return fn(*args, **kwargs)
        attempts = max(1, get_settings().DATABASE_LOCKED_RETRIES)
        failures = 0
        restated = False
        while True:
            try:
                return fn(*args, **kwargs)
            except DatabaseError as exc:
                if prepared.stale(exc) and not restated:
                    restated = True
                    continue
                failures += 1
                locked = isinstance(exc, OperationalError) and "locked" in str(exc)
                if not locked or failures >= attempts:
                    raise
                time.sleep(min(0.05 * 2 ** (failures - 1), 1.0))

    return wrapper


def _in_transaction() -> bool:
    """Is an atomic block open on the engine's connection (a caller's transaction)?"""
    from durable_workflow.models import WorkflowRun
    from durable_workflow.store import roundtrips

    return bool(roundtrips.connection_for(WorkflowRun).in_atomic_block)


def wake_workflow(
    run: RunRecord,
    *,
    now: dt.datetime,
    eager: bool = False,
    ready: bool | None = None,
    payload: dict[str, Any] | None = None,
) -> uuid.UUID | None:
    """Make sure exactly one ready workflow task exists for the run.

    With ``eager`` a newly created task is not published: its id is returned so
    the caller can run it at once, in this process, after its transaction
    commits. If that never happens, the repair pass publishes it. ``ready``: the
    caller has just looked whether a ready workflow task exists. ``payload``: that of
    a newly created task.
    """
    created = None
    if ready is None:
        ready = tasks.ready_workflow_task(run.id) is not None
    if not ready:
        (task,) = tasks.save_tasks([workflow_task_row(run, now=now, payload=payload)])
        if eager:
            created = task.id
        else:
            dispatch.enqueue(task)
    if run.status == RunStatus.WAITING:
        run.set(status=RunStatus.PENDING)
    return created


def workflow_task_row(
    run: RunRecord,
    *,
    now: dt.datetime,
    available_at: dt.datetime | None = None,
    payload: dict[str, Any] | None = None,
) -> Any:
    """A new (unsaved) workflow task of ``run``: its routing, marker and sticky owner."""
    return tasks.build_task(
        run_id=run.id,
        namespace=run.namespace,
        task_type=TaskType.WORKFLOW,
        available_at=available_at or now,
        queue=run.queue,
        connection=run.connection,
        now=now,
        payload=payload,
        compatibility=run.compatibility,
        **affinity.inherited(run, now=now),
    )


def wake_for_news(run_id: uuid.UUID, *, now: dt.datetime) -> None:
    """Make the run's next workflow task pick up news (child outcomes, messages).

    Never locks the run: flags its ready workflow task, or creates one.
    """
    from durable_workflow.models import Task, TaskStatus

    flagged = Task.objects.filter(
        run_id=run_id, task_type=TaskType.WORKFLOW, status=TaskStatus.READY
    ).update(payload={"absorb": True})
    if flagged:
        return
    from durable_workflow.store import runs

    run = runs.get_run(run_id)
    if run is None:
        return
    (task,) = tasks.save_tasks([workflow_task_row(run, now=now, payload={"absorb": True})])
    dispatch.enqueue(task)


def orm_access_error() -> WorkflowOrmAccessError:
    return WorkflowOrmAccessError(
        "a workflow body queried the database; bodies must be deterministic: "
        "move the query into an activity"
    )


# A body naming an alias whose connection is not open yet makes Django connect first,
# which reads time.monotonic and connects a socket before any execute wrapper runs:
# that is database access too, on whichever alias (the application's ``default`` when a
# router keeps the engine's tables elsewhere), not a non-deterministic call.
guards.attribute(os.path.dirname(django.db.__file__), orm_access_error)


def _refuse_orm_in_body(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    runtime = current_runtime()
    if runtime is not None:
        runtime.fail_fatally(orm_access_error())
    return execute(sql, params, many, context)


@contextlib.contextmanager
def orm_guard() -> Iterator[None]:
    """Refuse database access from workflow-body greenlets on every connection.

    Installed with Django's public ``execute_wrapper()`` on each connection, for the
    length of the block (a guard around the engine's own calls of a body, not a watch
    on the engine's statements: it refuses, it reorders nothing). A refused query
    never reaches the driver; if it was one on an engine model, its manager may first
    have sent the writes the engine held back (same transaction, same order). A
    query on an alias whose connection is not open yet is refused before it
    connects (``guards.attribute`` above).
    """
    with contextlib.ExitStack() as stack:
        for conn in connections.all():
            stack.enter_context(conn.execute_wrapper(_refuse_orm_in_body))
        yield


def failure_types() -> tuple[str, ...]:
    """The deployment's ``FAILURE_EXCEPTION_TYPES``: exceptions that fail a run besides
    those every workflow fails on and those its class declares."""
    return tuple(get_settings().FAILURE_EXCEPTION_TYPES)


def engine_limits() -> dict[str, int]:
    """The structural limits and history budget the runtime enforces itself."""
    settings = get_settings()
    limits = {
        kind: settings.limit(kind)
        for kind in (
            "pending_activity_count",
            "pending_child_count",
            "pending_timer_count",
            "command_batch_size",
        )
    }
    limits["warning_threshold_percent"] = settings.limit_warning_percent()
    limits["continue_as_new_event_threshold"] = settings.CONTINUE_AS_NEW_EVENT_THRESHOLD
    limits["continue_as_new_size_threshold"] = settings.CONTINUE_AS_NEW_SIZE_THRESHOLD
    return limits


def check_limit(
    kind: str, value: int, *, run_id: uuid.UUID | str = "", count: bool = False
) -> None:
    """Raise ``StructuralLimitExceeded`` when ``value`` passes the configured ``kind`` limit;
    a ``count`` limit warns from its threshold on."""
    settings = get_settings()
    configured = settings.limit(kind)
    if configured and value > configured:
        raise StructuralLimitExceeded(kind, value, configured)
    if count:
        percent = settings.limit_warning_percent()
        warn_if_near(kind, value, configured, percent=percent, run_id=str(run_id))
