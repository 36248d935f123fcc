"""Updates from outside: validation, durable acceptance or rejection, and lookups."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, contracts, namespaces, registry
from durable_workflow.codec import envelope
from durable_workflow.converter import WORKFLOW, arguments_from_plain, signature_of
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import PayloadCodecError
from durable_workflow.executor import lifecycle
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.intake import (
    Rejection,
    check_request_id,
    limit_rejection,
    record_decision,
    recorded,
    repeated_request,
    resolve_target,
)
from durable_workflow.executor.readonly import CallFailed, call_on_replayed
from durable_workflow.executor.start import StartOutcome
from durable_workflow.executor.with_start import (
    WithStart,
    intake_group,
    linked_start,
    lock_for_request,
    start_in_group,
)
from durable_workflow.headers import check_headers, with_headers
from durable_workflow.models import CommandStatus, CommandType, UpdateStatus
from durable_workflow.options import StartOptions
from durable_workflow.store import commands, database, messages, runs
from durable_workflow.store.messages import UpdateRecord
from durable_workflow.store.records import RunRecord
from durable_workflow.text import check_name, text_of


@dataclasses.dataclass(frozen=True)
class UpdateOutcome:
    record: UpdateRecord | None
    command_id: uuid.UUID
    outcome: str | None
    rejection_reason: str | None
    metadata: dict[str, Any]


def _find(workflow_type: str, name: str) -> tuple[str, Any] | None:
    updates: dict[str, Any] = getattr(registry.workflow_class(workflow_type), "_dw_updates", {})
    if name in updates:
        return name, updates[name]
    for public, method in updates.items():
        if getattr(method, "attr", None) == name:
            return public, method
    return None


def _check(run: RunRecord, name: str, arguments: Any) -> tuple[str, list[Any], Rejection | None]:
    public, values, rejection, method = _contract(run.workflow_type, name, arguments)
    if rejection is not None:
        return public, values, rejection
    if messages.pending_signal_count(run.id):
        return public, values, Rejection("rejected_pending_signal", "pending_signal")
    pending = messages.pending_update_count(run.id)
    rejection = limit_rejection("pending_update_count", pending, run_id=run.id)
    if rejection is None and method.validator_fn is not None:
        rejection = _validate(run, method.validator_fn, values)
    return public, values, rejection


def _contract(
    workflow_type: str, name: str, arguments: Any
) -> tuple[str, list[Any], Rejection | None, Any]:
    """What needs no run: the update is declared and the arguments fit its parameters."""
    found = _find(workflow_type, name)
    if found is None:
        return name, [], Rejection("rejected_unknown_update", "unknown_update"), None
    public, method = found
    if not isinstance(arguments, list | tuple | dict):
        errors = {"arguments": ["Arguments must be a list or a map."]}
        invalid = Rejection(
            "rejected_invalid_arguments", "invalid_arguments", {"validation_errors": errors}
        )
        return public, [], invalid, method
    try:
        values = contracts.bind_signature(method.fn, arguments)
    except contracts.ArgumentsInvalid as exc:
        invalid = Rejection(
            "rejected_invalid_arguments", "invalid_arguments", {"validation_errors": exc.errors}
        )
        return public, [], invalid, method
    return public, values, None, method


def _validate(run: RunRecord, validator: Any, values: list[Any]) -> Rejection | None:
    """Run the validator against the replayed state; any exception rejects the update.

    It receives the arguments as its own parameters declare them, like the handler.
    """
    try:
        typed = arguments_from_plain(values, signature_of(validator), receiver=WORKFLOW)
    except PayloadCodecError as exc:
        return Rejection(
            "rejected_invalid_arguments",
            "invalid_arguments",
            {"validation_errors": {"arguments": [str(exc)]}},
        )
    try:
        call_on_replayed(run, lambda instance: validator(instance, *typed))
    except CallFailed as exc:
        cause = exc.__cause__
        return Rejection(
            "rejected_invalid_arguments",
            "validation_failed",
            {"validation_errors": {"update": [text_of(cause) or type(cause).__name__]}},
        )
    return None


@retry_transaction
def submit_update(
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
) -> UpdateOutcome:
    """Accept or reject an update on the run; ``metadata`` joins its command's payload.
    A ``request_id`` the instance took an update under already answers that update."""
    check_name(name, field="update name")
    check_request_id(request_id)
    headers = check_headers(headers)
    space = namespaces.resolve(namespace)
    now = clock.now()
    if request_id is not None:
        metadata = {**(metadata or {}), "request_id": request_id}
    with database.atomic():
        run, rejection = resolve_target(instance_id, run_id, namespace=space)
        prior = repeated_request(instance_id, CommandType.UPDATE, request_id, namespace=space)
        if prior is not None:
            return _repeated(prior)
        public = name
        values: list[Any] = []
        if rejection is None and run is not None:
            public, values, rejection = _check(run, name, arguments)
        return _record_update(
            instance_id,
            run,
            _Submitted(public, values, rejection, headers),
            source=source,
            metadata=metadata or {},
            namespace=space,
            now=now,
        )


@dataclasses.dataclass(frozen=True)
class _Submitted:
    """An update as checked: its declared name, its arguments and why it is refused."""

    name: str
    values: list[Any]
    rejection: Rejection | None
    headers: dict[str, str] | None


def _record_update(
    instance_id: str,
    run: RunRecord | None,
    update: _Submitted,
    *,
    source: str,
    metadata: dict[str, Any],
    namespace: str,
    now: dt.datetime,
) -> UpdateOutcome:
    """Record the update's command and, on a run, its row and event (the event only on
    an open run: a closed or historical run's history is finished)."""
    accepted = update.rejection is None
    said = recorded(update.rejection, "")
    encoded = envelope.encode(update.values, run.payload_codec) if accepted and run else {}
    command = record_decision(
        CommandType.UPDATE,
        instance_id,
        run,
        said,
        accepted=accepted,
        source=source,
        payload=with_headers({"update_name": update.name, **metadata}, update.headers),
        namespace=namespace,
        now=now,
    )
    if run is None:
        return UpdateOutcome(
            None, command.id, command.outcome, command.rejection_reason, said.metadata
        )
    record = messages.create_update(
        instance_id=instance_id,
        run_id=run.id,
        command_id=command.id,
        name=update.name,
        arguments=encoded,
        status=UpdateStatus.ACCEPTED if accepted else UpdateStatus.REJECTED,
        rejection_reason=said.reason,
        failure_message="" if accepted else _message(update.rejection),
        now=now,
    )
    event = _update_event(record, update, encoded, command.id)
    if accepted:
        wake_workflow(run, now=now)
    if accepted or said.outcome not in _NOT_OPEN:
        lifecycle.append(run, [event], now=now)
        runs.save_run(run, now=now)
    return UpdateOutcome(
        record, command.id, command.outcome or None, command.rejection_reason, said.metadata
    )


def _update_event(
    record: UpdateRecord, update: _Submitted, encoded: dict[str, Any], command_id: uuid.UUID
) -> tuple[str, dict[str, Any]]:
    """``UpdateAccepted`` with the arguments and headers, or ``UpdateRejected`` with why."""
    if update.rejection is None:
        accepted = {
            "update_id": str(record.id),
            "update_name": update.name,
            "arguments": encoded,
            "command_id": str(command_id),
        }
        return EventType.UPDATE_ACCEPTED, with_headers(accepted, update.headers)
    return EventType.UPDATE_REJECTED, {
        "update_id": str(record.id),
        "update_name": update.name,
        "rejection_reason": update.rejection.reason,
        "message": record.failure_message,
    }


def _repeated(prior: commands.PriorCommand) -> UpdateOutcome:
    """The answer to a request id seen before: its update as it stands now."""
    command = prior.command
    record = messages.update_of_command(command.id)
    return UpdateOutcome(
        record, command.id, command.outcome or None, command.rejection_reason, prior.metadata
    )


def _repeated_with_start(
    instance_id: str, request_id: str, *, namespace: str
) -> UpdateWithStartOutcome | None:
    """The first outcome of an update-with-start under ``request_id``: its update (and
    linked start), or the refused start when nothing was submitted."""
    prior = repeated_request(instance_id, CommandType.UPDATE, request_id, namespace=namespace)
    if prior is not None:
        return UpdateWithStartOutcome(linked_start(instance_id, prior), _repeated(prior))
    refused = repeated_request(instance_id, CommandType.START, request_id, namespace=namespace)
    if refused is not None and refused.payload.get("intake_mode") == "update_with_start":
        return UpdateWithStartOutcome(linked_start(instance_id, refused), None)
    return None


_NOT_OPEN = ("rejected_not_active", "rejected_not_current", "rejected_not_started")


def _message(rejection: Rejection | None) -> str:
    if rejection is None:
        return ""
    errors = rejection.metadata.get("validation_errors") or {}
    details = "; ".join(m for messages_ in errors.values() for m in messages_)
    return details or rejection.outcome


@dataclasses.dataclass(frozen=True)
class UpdateWithStartOutcome:
    #: The start command (``None`` when the update was refused before any start).
    start: StartOutcome | None
    #: The update command (``None`` when the start itself was refused).
    update: UpdateOutcome | None


@retry_transaction
def update_with_start(
    *,
    instance_id: str,
    workflow_type: str,
    workflow_class: str,
    update_name: str,
    update_arguments: Any,
    start_arguments: list[Any],
    options: StartOptions,
    queue: str | None,
    connection: str | None,
    source: str = "client",
    request_id: str | None = None,
    namespace: str | None = None,
) -> UpdateWithStartOutcome:
    """Start the workflow (its duplicate policy applied) and submit an update, in one
    transaction. An undeclared update or arguments that do not fit it are refused before
    any run exists; a refused start submits nothing. The update's validator runs after
    the start, against the run it will reach (a new one, or the active one).

    A ``request_id`` this instance already took an update-with-start (or an update)
    under returns the first outcome: nothing is started or submitted again."""
    check_name(update_name, field="update name")
    check_request_id(request_id)
    space = namespaces.resolve(namespace)
    now = clock.now()
    with database.atomic():
        if request_id is not None:
            lock_for_request(instance_id, workflow_type, namespace=space, now=now)
            repeated = _repeated_with_start(instance_id, request_id, namespace=space)
            if repeated is not None:
                return repeated
        group = intake_group("update_with_start", request_id)
        request = WithStart(instance_id, workflow_type, source, group, space, now)
        public, _, rejection, _ = _contract(workflow_type, update_name, update_arguments)
        if rejection is not None:
            refused = _refuse_before_start(request, public, rejection)
            return UpdateWithStartOutcome(start=None, update=refused)
        start = start_in_group(
            request,
            workflow_class=workflow_class,
            arguments=start_arguments,
            options=options,
            queue=queue,
            connection=connection,
        )
        if not start.accepted:
            return UpdateWithStartOutcome(start=start, update=None)
        update = submit_update(
            instance_id,
            update_name,
            update_arguments,
            source=source,
            metadata=group,
            headers=getattr(options, "headers", None),
            namespace=space,
        )
    return UpdateWithStartOutcome(start=start, update=update)


def _refuse_before_start(request: WithStart, name: str, rejection: Rejection) -> UpdateOutcome:
    """Record the refused update of an update-with-start: no run, nothing started."""
    request.reserve()
    command = commands.record_command(
        namespace=request.namespace,
        instance_id=request.instance_id,
        run_id=None,
        command_type=CommandType.UPDATE,
        status=CommandStatus.REJECTED,
        outcome=rejection.outcome,
        rejection_reason=rejection.reason,
        source=request.source,
        payload={"update_name": name, **request.group},
        metadata=rejection.metadata,
        now=request.now,
    )
    return UpdateOutcome(None, command.id, command.outcome, rejection.reason, rejection.metadata)
