"""Starting a workflow: the start command, the first run and its first task, atomically."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, compatibility, namespaces
from durable_workflow.codec import envelope
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.executor import deduplication, dispatch, lifecycle, workflow_gate
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.opening import Event, started_event
from durable_workflow.headers import with_headers
from durable_workflow.ids import validate_instance_id
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    CommandStatus,
    CommandType,
    RunStatus,
    TaskType,
)
from durable_workflow.options import DEFAULT_PRIORITY, DuplicateStartPolicy, StartOptions
from durable_workflow.store import commands, database, runs, tasks, workflow_queues
from durable_workflow.store.records import CommandRecord, RunRecord


@dataclasses.dataclass(frozen=True)
class StartOutcome:
    accepted: bool
    outcome: str
    command_id: uuid.UUID
    instance_id: str
    run_id: uuid.UUID | None
    rejection_reason: str | None = None
    #: For ``deduplication_id_in_use``: the instance whose open run holds the id.
    holder_instance_id: str | None = None


@dataclasses.dataclass(frozen=True)
class _Request:
    """What every command a start records names: the instance, the asker, the moment."""

    instance_id: str
    workflow_type: str
    options: StartOptions
    source: str
    metadata: dict[str, Any] | None
    namespace: str
    now: dt.datetime


@retry_transaction
def start_workflow(
    *,
    instance_id: str,
    workflow_type: str,
    workflow_class: str,
    arguments: list[Any],
    options: StartOptions,
    queue: str | None,
    connection: str | None,
    source: str = "client",
    command_metadata: dict[str, Any] | None = None,
    encoded_arguments: dict[str, Any] | None = None,
    payload_codec: str | None = None,
    parent: dict[str, Any] | None = None,
    parent_instance_id: str | None = None,
    lineage_events: list[tuple[str, dict[str, Any]]] | None = None,
    namespace: str | None = None,
) -> StartOutcome:
    """Record the start command and, unless it is a duplicate, the first run and its task.

    ``encoded_arguments`` / ``payload_codec`` / ``parent`` / ``parent_instance_id`` are
    for child workflows, whose arguments arrive already encoded in the parent's codec;
    ``lineage_events`` are appended after ``WorkflowStarted`` (e.g. ``ScheduleTriggered``)
    and are informational to replay. ``options.queue``, when set, routes the run instead
    of ``queue``; on a queue that limits its runs, the run may wait for a slot
    (``workflow_gate``). ``namespace``: the default one unless given.
    """
    validate_instance_id(instance_id)
    space = namespaces.resolve(namespace)
    settings = get_settings()
    codec = payload_codec or settings.PAYLOAD_CODEC
    # Encoding first means bad arguments fail before anything is written.
    encoded = encoded_arguments or envelope.encode(list(arguments), codec)
    now = clock.now()
    with database.atomic():
        runs.reserve_instance(instance_id, workflow_type, namespace=space, now=now)
        instance = runs.lock_instance(instance_id, namespace=space)
        assert instance is not None
        if options.request_id is not None:  # under the instance lock: one delivery wins
            prior = _repeated(instance_id, options.request_id, namespace=space)
            if prior is not None:
                return prior
            command_metadata = {**(command_metadata or {}), "request_id": options.request_id}
        request = _Request(
            instance_id, workflow_type, options, source, command_metadata, space, now
        )
        if instance.current_run_id is not None:
            return _duplicate(request, instance.current_run_id)
        run, holder = _create_run(
            request,
            workflow_class=workflow_class,
            arguments=encoded,
            payload_codec=codec,
            queue=options.queue or queue or settings.DEFAULT_QUEUE,
            connection=connection,
            parent=parent,
        )
        if run is None:
            return _held(request, holder)
        return _started(request, run, parent_instance_id, lineage_events or [])


def _repeated(instance_id: str, request_id: str, *, namespace: str) -> StartOutcome | None:
    """The outcome of the start this instance took under ``request_id`` (if any)."""
    prior = commands.command_for_request(
        instance_id, CommandType.START, request_id, namespace=namespace
    )
    if prior is None:
        return None
    command = prior.command
    return StartOutcome(
        command.status == CommandStatus.ACCEPTED,
        command.outcome,
        command.id,
        instance_id,
        command.run_id,
        command.rejection_reason,
        holder_instance_id=prior.metadata.get("holder_instance_id"),
    )


def _duplicate(request: _Request, run_id: uuid.UUID) -> StartOutcome:
    """The instance has a run already: return it if active and the policy says so."""
    current = runs.get_run(run_id)
    active = current is not None and current.status not in TERMINAL_RUN_STATUSES
    policy = request.options.duplicate_start_policy
    if active and policy == DuplicateStartPolicy.RETURN_EXISTING_ACTIVE:
        outcome = "returned_existing_active"
        command = _record(request, run_id, CommandStatus.ACCEPTED, outcome, request.metadata)
        return StartOutcome(True, outcome, command.id, request.instance_id, run_id)
    reason = "instance_already_started"
    command = _record(
        request, run_id, CommandStatus.REJECTED, "rejected_duplicate", request.metadata, reason
    )
    return StartOutcome(
        False, "rejected_duplicate", command.id, request.instance_id, run_id, reason
    )


def _create_run(
    request: _Request,
    *,
    workflow_class: str,
    arguments: dict[str, Any],
    payload_codec: str,
    queue: str | None,
    connection: str | None,
    parent: dict[str, Any] | None,
) -> tuple[RunRecord | None, RunRecord | None]:
    """The new run; or ``None`` and the open run holding the start's de-duplication id
    (``None`` too when a concurrent start took the id first)."""
    options = request.options
    holder = deduplication.holder(options.deduplication_id, namespace=request.namespace)
    if holder is not None:
        return None, holder
    run = deduplication.create_unless_held(
        options.deduplication_id,
        namespace=request.namespace,
        instance_id=request.instance_id,
        workflow_type=request.workflow_type,
        workflow_class=workflow_class,
        arguments=arguments,
        payload_codec=payload_codec,
        queue=queue,
        connection=connection,
        now=request.now,
        extra={**_run_extras(options, request.now), **(parent or {})},
    )
    return run, None


def _held(request: _Request, holder: RunRecord | None) -> StartOutcome:
    """Reject the start: another open run holds its de-duplication id."""
    command, holder = deduplication.reject(
        request.instance_id,
        request.options,
        request.source,
        request.metadata,
        holder,
        namespace=request.namespace,
        now=request.now,
    )
    return StartOutcome(
        False,
        "rejected_duplicate",
        command.id,
        request.instance_id,
        None,
        deduplication.REASON,
        holder_instance_id=holder.instance_id if holder else None,
    )


def _started(
    request: _Request,
    run: RunRecord,
    parent_instance_id: str | None,
    lineage_events: list[Event],
) -> StartOutcome:
    """Record the accepted start, the run's first events and its first task."""
    options = request.options
    payload = {"workflow_type": request.workflow_type, **(request.metadata or {})}
    command = _record(
        request,
        run.id,
        CommandStatus.ACCEPTED,
        "started_new",
        with_headers(payload, options.headers),
    )
    started = started_event(
        run,
        arguments=run.arguments,
        details=_started_details(options, run),
        memo=options.memo,
        search_attributes=options.search_attributes,
        parent_instance_id=parent_instance_id,
        headers=options.headers,
    )
    accepted = (EventType.START_ACCEPTED, {"command_id": str(command.id)})
    lifecycle.append(run, [accepted, started, *lineage_events], now=request.now)
    _first_task(run, now=request.now)
    return StartOutcome(True, "started_new", command.id, request.instance_id, run.id)


def _first_task(run: RunRecord, *, now: dt.datetime) -> None:
    """The run's first workflow task; on a queue that limits its runs and has no free
    slot, no message until one frees (``workflow_gate.wake``)."""
    starts_now = workflow_gate.enter(run, now=now)
    task = tasks.create_task(
        run_id=run.id,
        namespace=run.namespace,
        task_type=TaskType.WORKFLOW,
        available_at=now,
        queue=run.queue,
        connection=run.connection,
        now=now,
        compatibility=run.compatibility,
    )
    run.set(status=RunStatus.PENDING)
    runs.save_run(run, now=now)
    if starts_now:
        dispatch.enqueue(task)
    else:
        workflow_queues.mark_task_waiting(task.id, now=now)


def _record(
    request: _Request,
    run_id: uuid.UUID | None,
    status: str,
    outcome: str,
    payload: dict[str, Any] | None,
    rejection_reason: str | None = None,
) -> CommandRecord:
    """The start command, as the request asked it and with what came of it."""
    return commands.record_command(
        namespace=request.namespace,
        instance_id=request.instance_id,
        run_id=run_id,
        command_type=CommandType.START,
        status=status,
        outcome=outcome,
        rejection_reason=rejection_reason,
        source=request.source,
        payload=payload,
        now=request.now,
    )


def _started_details(options: StartOptions, run: RunRecord) -> dict[str, Any]:
    """What ``WorkflowStarted`` records of a start's options: visibility and deadlines."""
    return {
        "business_key": options.business_key,
        "labels": options.labels,
        "execution_timeout_seconds": options.execution_timeout_seconds,
        "run_timeout_seconds": options.run_timeout_seconds,
        "execution_deadline_at": _iso(run.execution_deadline_at),
        "run_deadline_at": _iso(run.run_deadline_at),
    }


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _run_extras(options: StartOptions, now: dt.datetime) -> dict[str, Any]:
    def deadline(seconds: int | None) -> dt.datetime | None:
        return now + dt.timedelta(seconds=seconds) if seconds else None

    return {
        # The build that starts a run (a client, a parent's worker, a schedule tick)
        # decides which workers may execute it.
        "compatibility": compatibility.current_marker(),
        "business_key": options.business_key,
        "labels": dict(options.labels),
        "memo": dict(options.memo),
        "search_attributes": {k: v for k, v in options.search_attributes.items() if v is not None},
        "execution_timeout_seconds": options.execution_timeout_seconds,
        "run_timeout_seconds": options.run_timeout_seconds,
        "execution_deadline_at": deadline(options.execution_timeout_seconds),
        "run_deadline_at": deadline(options.run_timeout_seconds),
        "deduplication_id": options.deduplication_id,
        "priority": DEFAULT_PRIORITY if options.priority is None else options.priority,
    }
