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
from durable_workflow.store import visibility as visibility_store


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
    ``lineage_events``
    are appended after ``WorkflowStarted`` (e.g. ``ScheduleTriggered``) and are
    informational to replay. ``options.queue``, when set, routes the run instead of
    ``queue``; on a queue that limits its runs, the run may wait for a slot
    (``workflow_gate``). ``namespace``: the default
    one unless given.
    """
    validate_instance_id(instance_id)
    space = namespaces.resolve(namespace)
    settings = get_settings()
    queue = options.queue or queue
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
        if instance.current_run_id is not None:
            return _duplicate(
                instance.current_run_id,
                instance_id,
                options,
                source,
                command_metadata,
                namespace=space,
                now=now,
            )
        holder = deduplication.holder(options.deduplication_id, namespace=space)
        run = None
        if holder is None:
            run = deduplication.create_unless_held(
                options.deduplication_id,
                namespace=space,
                instance_id=instance_id,
                workflow_type=workflow_type,
                workflow_class=workflow_class,
                arguments=encoded,
                payload_codec=codec,
                queue=queue or settings.DEFAULT_QUEUE,
                connection=connection,
                now=now,
                extra={**_run_extras(options, now), **(parent or {})},
            )
        if run is None:
            command, holder = deduplication.reject(
                instance_id, options, source, command_metadata, holder, namespace=space, now=now
            )
            return StartOutcome(
                False,
                "rejected_duplicate",
                command.id,
                instance_id,
                None,
                deduplication.REASON,
                holder_instance_id=holder.instance_id if holder else None,
            )
        command = commands.record_command(
            namespace=space,
            instance_id=instance_id,
            run_id=run.id,
            command_type=CommandType.START,
            status=CommandStatus.ACCEPTED,
            outcome="started_new",
            source=source,
            now=now,
            payload=with_headers(
                {"workflow_type": workflow_type, **(command_metadata or {})}, options.headers
            ),
        )
        fingerprint = _fingerprint(workflow_type)
        run.set(workflow_definition_fingerprint=fingerprint)
        if options.search_attributes:
            visibility_store.replace_attributes(
                run.id, {k: v for k, v in options.search_attributes.items() if v is not None}
            )
        started = {
            "workflow_definition_fingerprint": fingerprint,
            "workflow_type": workflow_type,
            "workflow_class": workflow_class,
            "workflow_instance_id": instance_id,
            "workflow_run_id": str(run.id),
            "run_number": run.run_number,
            "arguments": encoded,
            "payload_codec": codec,
            "business_key": options.business_key,
            "labels": options.labels,
            "execution_timeout_seconds": options.execution_timeout_seconds,
            "run_timeout_seconds": options.run_timeout_seconds,
            "execution_deadline_at": _iso(run.execution_deadline_at),
            "run_deadline_at": _iso(run.run_deadline_at),
            **started_context(
                queue=run.queue,
                memo=options.memo,
                search_attributes=options.search_attributes,
                parent_run_id=run.parent_run_id,
                parent_instance_id=parent_instance_id,
            ),
        }
        lifecycle.append(
            run,
            [
                (EventType.START_ACCEPTED, {"command_id": str(command.id)}),
                (EventType.WORKFLOW_STARTED, with_headers(started, options.headers)),
                *(lineage_events or []),
            ],
            now=now,
        )
        starts_now = workflow_gate.enter(run, now=now)
        task = tasks.create_task(
            run_id=run.id,
            namespace=space,
            task_type=TaskType.WORKFLOW,
            available_at=now,
            queue=run.queue,
            connection=connection,
            now=now,
            compatibility=run.compatibility,
        )
        run.set(status=RunStatus.PENDING)
        runs.save_run(run, now=now)
        if starts_now:
            dispatch.enqueue(task)
        else:  # no message until a slot frees (``workflow_gate.wake``)
            workflow_queues.mark_task_waiting(task.id, now=now)
    return StartOutcome(True, "started_new", command.id, instance_id, run.id)


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


def started_context(
    *,
    queue: str | None,
    memo: dict[str, Any],
    search_attributes: dict[str, Any],
    parent_run_id: uuid.UUID | None,
    parent_instance_id: str | None,
) -> dict[str, Any]:
    """What ``dw.info()`` reads from ``WorkflowStarted``: routing, visibility, parent."""
    context: dict[str, Any] = {
        "queue": queue,
        "memo": dict(memo or {}),
        "search_attributes": {k: v for k, v in (search_attributes or {}).items() if v is not None},
    }
    if parent_run_id is not None:
        context["parent_workflow_instance_id"] = parent_instance_id
        context["parent_workflow_run_id"] = str(parent_run_id)
    return context


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _fingerprint(workflow_type: str) -> str:
    from durable_workflow import registry
    from durable_workflow.engine.versions import definition_fingerprint

    try:
        return definition_fingerprint(registry.workflow_class(workflow_type))
    except LookupError:
        return ""


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


def _duplicate(
    run_id: uuid.UUID,
    instance_id: str,
    options: StartOptions,
    source: str,
    metadata: dict[str, Any] | None,
    *,
    namespace: str,
    now: dt.datetime,
) -> StartOutcome:
    current = runs.get_run(run_id)
    active = current is not None and current.status not in TERMINAL_RUN_STATUSES
    if active and options.duplicate_start_policy == DuplicateStartPolicy.RETURN_EXISTING_ACTIVE:
        command = commands.record_command(
            namespace=namespace,
            instance_id=instance_id,
            run_id=run_id,
            command_type=CommandType.START,
            status=CommandStatus.ACCEPTED,
            outcome="returned_existing_active",
            source=source,
            payload=metadata,
            now=now,
        )
        return StartOutcome(True, "returned_existing_active", command.id, instance_id, run_id)
    command = commands.record_command(
        namespace=namespace,
        instance_id=instance_id,
        run_id=run_id,
        command_type=CommandType.START,
        status=CommandStatus.REJECTED,
        outcome="rejected_duplicate",
        rejection_reason="instance_already_started",
        source=source,
        payload=metadata,
        now=now,
    )
    return StartOutcome(
        False, "rejected_duplicate", command.id, instance_id, run_id, "instance_already_started"
    )
