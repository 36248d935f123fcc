"""Signals from outside: intake checks, durable acceptance or rejection, signal-with-start."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, contracts, namespaces, registry, text
from durable_workflow.codec import envelope
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.engine.limits import warn_if_near
from durable_workflow.exceptions import InvalidValueError, WorkflowNotFoundError
from durable_workflow.executor import lifecycle
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.start import StartOutcome
from durable_workflow.executor.with_start import (
    WithStart,
    intake_group,
    linked_start,
    lock_for_request,
    start_in_group,
)
from durable_workflow.headers import check_headers, with_headers
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    CommandStatus,
    CommandType,
    SignalStatus,
)
from durable_workflow.options import DuplicateStartPolicy, StartOptions
from durable_workflow.store import commands, database, messages, runs
from durable_workflow.store.records import CommandRecord, RunRecord
from durable_workflow.text import check_name


@dataclasses.dataclass(frozen=True)
class Rejection:
    outcome: str
    reason: str | None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


def recorded(rejection: Rejection | None, accepted: str) -> Rejection:
    """The outcome, rejection reason and metadata a command records: the rejection's,
    or for an accepted command (``rejection`` is ``None``) the outcome ``accepted`` with
    no reason and no metadata."""
    return Rejection(accepted, None) if rejection is None else rejection


def record_decision(
    command_type: str,
    instance_id: str,
    run: RunRecord | None,
    said: Rejection,
    *,
    accepted: bool,
    source: str,
    payload: dict[str, Any],
    namespace: str,
    now: dt.datetime,
    reason: str = "",
) -> CommandRecord:
    """A command accepted or rejected on ``run`` (``None``: the instance has none to
    take it), recording ``said`` (what ``recorded`` answers): outcome, reason, metadata."""
    return commands.record_command(
        namespace=namespace,
        instance_id=instance_id,
        run_id=run.id if run else None,
        command_type=command_type,
        status=CommandStatus.ACCEPTED if accepted else CommandStatus.REJECTED,
        outcome=said.outcome,
        rejection_reason=said.reason,
        source=source,
        reason=reason,
        payload=payload,
        metadata=said.metadata,
        now=now,
    )


@dataclasses.dataclass(frozen=True)
class SignalOutcome:
    accepted: bool
    outcome: str
    command_id: uuid.UUID
    instance_id: str
    run_id: uuid.UUID | None
    signal_id: uuid.UUID | None
    rejection_reason: str | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


def resolve_target(
    instance_id: str, run_id: str | uuid.UUID | None, *, namespace: str
) -> tuple[RunRecord | None, Rejection | None]:
    """Lock the instance's newest run and check it can take a command."""
    if runs.get_instance(instance_id, namespace=namespace) is None:
        raise WorkflowNotFoundError(not_found_message(instance_id, namespace))
    current = runs.current_run(instance_id, namespace=namespace)
    if current is None:
        return None, Rejection("rejected_not_started", "instance_not_started")
    run = runs.lock_run(current.id)
    assert run is not None
    if run_id is not None and str(run_id) != str(run.id):
        return run, Rejection(
            "rejected_not_current",
            "selected_run_not_current",
            {"requested_run_id": str(run_id), "resolved_run_id": str(run.id)},
        )
    if run.status in TERMINAL_RUN_STATUSES:
        return run, Rejection("rejected_not_active", "run_not_active")
    return run, None


def check_request_id(request_id: str | None) -> None:
    """A request id is a caller's string: at most 255 characters, no control characters."""
    if request_id is None:
        return
    if not isinstance(request_id, str):
        raise InvalidValueError("request_id must be a string", field="request_id")
    reason = text.problem(request_id, max_length=255)
    if reason is not None:
        raise InvalidValueError(f"request_id: {reason}", field="request_id", reason=reason)


def not_found_message(instance_id: str, namespace: str) -> str:
    return f"no workflow instance {instance_id!r} in namespace {namespace!r}"


def repeated_request(
    instance_id: str, command_type: str, request_id: str | None, *, namespace: str
) -> commands.PriorCommand | None:
    """The command this instance already took under ``request_id`` (call it holding the
    run lock, so two deliveries of one request cannot both miss it)."""
    if request_id is None:
        return None
    return commands.command_for_request(instance_id, command_type, request_id, namespace=namespace)


def limit_rejection(kind: str, value: int, *, run_id: uuid.UUID | str = "") -> Rejection | None:
    """Refuse one more of ``value`` pending ``kind`` items at the limit; warn near it."""
    settings = get_settings()
    configured = settings.limit(kind)
    if not configured or value < configured:
        percent = settings.limit_warning_percent()
        warn_if_near(kind, value + 1, configured, percent=percent, run_id=str(run_id))
        return None
    return Rejection(
        "structural_limit_exceeded",
        "structural_limit_exceeded",
        {
            "structural_limit_kind": kind,
            "structural_limit_value": value + 1,
            "structural_limit_configured": configured,
        },
    )


def check_signal(
    workflow_type: str, name: str, arguments: Any
) -> tuple[list[Any], Rejection | None]:
    """Validate a signal against the workflow's declared contract."""
    cls = registry.workflow_class(workflow_type)
    declared: dict[str, Any] = getattr(cls, "_dw_signal_contracts", {})
    if name not in declared:
        return [], Rejection("rejected_unknown_signal", "unknown_signal")
    if not isinstance(arguments, list | tuple | dict):
        return [], Rejection(
            "rejected_invalid_arguments",
            "invalid_arguments",
            {"validation_errors": {"arguments": ["Arguments must be a list or a map."]}},
        )
    try:
        return contracts.check_params(declared[name], arguments), None
    except contracts.ArgumentsInvalid as exc:
        return [], Rejection(
            "rejected_invalid_arguments", "invalid_arguments", {"validation_errors": exc.errors}
        )


@retry_transaction
def send_signal(
    instance_id: str,
    name: str,
    arguments: Any,
    *,
    run_id: str | uuid.UUID | None = None,
    source: str = "client",
    metadata: dict[str, Any] | None = None,
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    namespace: str | None = None,
) -> SignalOutcome:
    """Record a signal for the instance's current run (or the pinned ``run_id``).

    A ``request_id`` the instance already took a signal under returns that signal's
    outcome again and records nothing (a client retrying after a lost answer).
    """
    check_name(name, field="signal name")
    check_request_id(request_id)
    headers = check_headers(headers)
    space = namespaces.resolve(namespace)
    now = clock.now()
    with database.atomic():
        run, rejection = resolve_target(instance_id, run_id, namespace=space)
        prior = repeated_request(instance_id, CommandType.SIGNAL, request_id, namespace=space)
        if prior is not None:
            return _repeated_signal(prior)
        if request_id is not None:
            metadata = {**(metadata or {}), "request_id": request_id}
        values: list[Any] = []
        if rejection is None and run is not None:
            values, rejection = check_signal(run.workflow_type, name, arguments)
        if rejection is None and run is not None:
            rejection = limit_rejection(
                "pending_signal_count", messages.pending_signal_count(run.id), run_id=run.id
            )
        return _record_signal(
            instance_id,
            run,
            name,
            values,
            rejection,
            source,
            metadata or {},
            namespace=space,
            now=now,
            headers=headers,
        )


def _repeated_signal(prior: commands.PriorCommand) -> SignalOutcome:
    return SignalOutcome(
        accepted=prior.command.status == CommandStatus.ACCEPTED,
        outcome=prior.command.outcome,
        command_id=prior.command.id,
        instance_id=prior.command.instance_id,
        run_id=prior.command.run_id,
        signal_id=prior.signal_id,
        rejection_reason=prior.command.rejection_reason,
        metadata=prior.metadata,
    )


def _record_signal(
    instance_id: str,
    run: RunRecord | None,
    name: str,
    values: list[Any],
    rejection: Rejection | None,
    source: str,
    metadata: dict[str, Any],
    *,
    namespace: str,
    now: dt.datetime,
    headers: dict[str, str] | None = None,
) -> SignalOutcome:
    codec = run.payload_codec if run else get_settings().PAYLOAD_CODEC
    encoded = envelope.encode(values, codec) if rejection is None else {}
    accepted = rejection is None
    said = recorded(rejection, "signal_received")
    command = record_decision(
        CommandType.SIGNAL,
        instance_id,
        run,
        said,
        accepted=accepted,
        source=source,
        payload=with_headers({"signal_name": name, **metadata}, headers),
        namespace=namespace,
        now=now,
    )
    signal_id = messages.create_signal(
        instance_id=instance_id,
        run_id=run.id if run else None,
        command_id=command.id,
        name=name,
        arguments=encoded,
        status=SignalStatus.RECEIVED if accepted else SignalStatus.REJECTED,
        rejection_reason=said.reason,
        received_sequence=run.next_sequence if accepted and run else None,
        now=now,
    )
    if accepted and run is not None:
        received = {
            "signal_id": str(signal_id),
            "signal_name": name,
            "arguments": encoded,
            "command_id": str(command.id),
        }
        event = (EventType.SIGNAL_RECEIVED, with_headers(received, headers))
        lifecycle.append(run, [event], now=now)
        wake_workflow(run, now=now)
        runs.save_run(run, now=now)
    return SignalOutcome(
        accepted=accepted,
        outcome=command.outcome,
        command_id=command.id,
        instance_id=instance_id,
        run_id=run.id if run else None,
        signal_id=signal_id,
        rejection_reason=command.rejection_reason,
        metadata=said.metadata,
    )


@dataclasses.dataclass(frozen=True)
class SignalWithStartOutcome:
    start: StartOutcome | None
    signal: SignalOutcome


@retry_transaction
def signal_with_start(
    *,
    instance_id: str,
    workflow_type: str,
    workflow_class: str,
    signal_name: str,
    signal_arguments: Any,
    start_arguments: list[Any],
    options: StartOptions,
    queue: str | None,
    connection: str | None,
    source: str = "client",
    request_id: str | None = None,
    namespace: str | None = None,
) -> SignalWithStartOutcome:
    """Start the workflow unless an active run exists, and signal it, in one transaction.

    An unknown signal or invalid arguments are rejected before any run exists. A
    ``request_id`` the instance already took a signal under returns that first outcome
    (its linked start too) and neither starts nor signals again.
    """
    check_name(signal_name, field="signal name")
    check_request_id(request_id)
    space = namespaces.resolve(namespace)
    now = clock.now()
    with database.atomic():
        if request_id is not None:
            lock_for_request(instance_id, workflow_type, namespace=space, now=now)
            repeated = _repeated_with_start(instance_id, request_id, namespace=space)
            if repeated is not None:
                return repeated
        group = intake_group("signal_with_start", request_id)
        request = WithStart(instance_id, workflow_type, source, group, space, now)
        values, rejection = check_signal(workflow_type, signal_name, signal_arguments)
        if rejection is not None:
            refused = _refuse_before_start(request, signal_name, rejection)
            return SignalWithStartOutcome(start=None, signal=refused)
        start = start_in_group(
            request,
            workflow_class=workflow_class,
            arguments=start_arguments,
            options=dataclasses.replace(
                options, duplicate_start_policy=DuplicateStartPolicy.RETURN_EXISTING_ACTIVE
            ),
            queue=queue,
            connection=connection,
        )
        signal = send_signal(
            instance_id,
            signal_name,
            values,
            source=source,
            metadata=group,
            headers=getattr(options, "headers", None),
            namespace=space,
        )
    return SignalWithStartOutcome(start=start, signal=signal)


def _repeated_with_start(
    instance_id: str, request_id: str, *, namespace: str
) -> SignalWithStartOutcome | None:
    """The first outcome of a signal-with-start under ``request_id``: its signal and the
    start linked to it."""
    prior = repeated_request(instance_id, CommandType.SIGNAL, request_id, namespace=namespace)
    if prior is None:
        return None
    return SignalWithStartOutcome(linked_start(instance_id, prior), _repeated_signal(prior))


def _refuse_before_start(request: WithStart, name: str, rejection: Rejection) -> SignalOutcome:
    """Record the refused signal of a signal-with-start; nothing is started."""
    request.reserve()
    current = runs.current_run(request.instance_id, namespace=request.namespace)
    return _record_signal(
        request.instance_id,
        current,
        name,
        [],
        rejection,
        request.source,
        request.group,
        namespace=request.namespace,
        now=request.now,
    )
