"""Start routes: by alias, signal- and update-with-start, and the control-plane start."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from django.http import HttpRequest, HttpResponse

from durable_workflow import contracts, registry
from durable_workflow.conf import get_settings
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import UnknownTypeError
from durable_workflow.executor import intake, start_workflow, updates
from durable_workflow.ids import uuid7
from durable_workflow.options import DuplicateStartPolicy
from durable_workflow.store import runs
from durable_workflow.webhooks import exposure, records, responses, validation
from durable_workflow.webhooks.conf import WebhookSettings
from durable_workflow.webhooks.views.base import Respond, WebhookView
from durable_workflow.webhooks.views.updates import update_document

_START_FIELDS = {"workflow_id", "on_duplicate", "visibility"}


def _workflow_class(type_key: str | None, alias: str) -> type:
    try:
        if type_key is None:
            raise UnknownTypeError(alias)
        return registry.workflow_class(type_key)
    except UnknownTypeError:
        raise Respond(
            responses.not_found("unknown_alias", f"No workflow is exposed as [{alias}].")
        ) from None


def _routing(cls: type) -> dict[str, Any]:
    return {
        "workflow_class": class_path(cls),
        "queue": getattr(cls, "queue", None),
        "connection": getattr(cls, "connection", None),
    }


def _held_by_another_type(instance_id: str, type_key: str, *, namespace: str) -> bool:
    """Whether the id belongs to an instance of another workflow type.

    Such a start is refused without writing anything, and its answer says nothing
    about that instance: not its type, not its runs, not whether its type is
    exposed here. An instance of a type these routes do not expose must not be
    discoverable, nor get rows written against it, through a start.
    """
    instance = runs.get_instance(instance_id, namespace=namespace)
    return instance is not None and instance.workflow_type != type_key


def _start_response(instance_id: str, type_key: str, outcome: Any) -> HttpResponse:
    """The answer to a start; ``outcome`` is ``None`` when another type holds the id.

    A start refused for its de-duplication id says so (``deduplication_id_in_use``, 409)
    but not which instance holds the id: that one may be of a type not exposed here."""
    accepted = outcome is not None and outcome.accepted
    name = outcome.outcome if outcome is not None else "rejected_duplicate"
    reason = (outcome.rejection_reason if outcome is not None else None) or (
        "instance_already_started"
    )
    run_id = str(outcome.run_id) if outcome is not None and outcome.run_id else None
    command_id = outcome.command_id if outcome is not None else None
    document = responses.command_envelope(
        outcome=name,
        accepted=accepted,
        workflow_id=instance_id,
        run_id=run_id,
        command_id=str(command_id) if command_id else None,
        workflow_type=type_key,
        rejection_reason=None if accepted else reason,
        command_sequence=records.command_sequence(command_id) if command_id else None,
    )
    return responses.json_response(document, responses.status_of(name, accepted=accepted))


class StartView(WebhookView):
    """``POST start/<alias>``: body keys are ``handle()`` parameters, by name, besides the
    reserved ``workflow_id``, ``on_duplicate``, ``visibility`` and ``deduplication_id``."""

    def post(self, request: HttpRequest, alias: str) -> HttpResponse:
        type_key = exposure.type_for_alias(alias, self.workflows)
        cls = _workflow_class(type_key, alias)
        assert type_key is not None
        data = self.body()
        instance_id = (
            validation.instance_id(data["workflow_id"]) if "workflow_id" in data else uuid7().hex
        )
        policy = validation.on_duplicate(data.get("on_duplicate", "reject_duplicate"))
        options = dataclasses.replace(
            validation.start_options(data, policy).with_deduplication_id(
                validation.deduplication_id(data)
            ),
            request_id=self.request_id(),
        )
        named = {k: v for k, v in data.items() if k not in _START_FIELDS | {"deduplication_id"}}
        arguments = validation.handle_arguments(cls, named)
        validation.ensure_encodable(arguments)
        if _held_by_another_type(instance_id, type_key, namespace=self.namespace):
            return _start_response(instance_id, type_key, None)
        outcome = start_workflow(
            instance_id=instance_id,
            workflow_type=type_key,
            arguments=arguments,
            options=options,
            source=responses.COMMAND_SOURCE,
            namespace=self.namespace,
            **_routing(cls),
        )
        self.ingress([outcome.command_id], data)
        return _start_response(instance_id, type_key, outcome)


class SignalWithStartView(WebhookView):
    """``POST start/<alias>/signals/<signal>``: start unless active, then signal, atomically."""

    def post(self, request: HttpRequest, alias: str, signal: str) -> HttpResponse:
        type_key = exposure.type_for_alias(alias, self.workflows)
        cls = _workflow_class(type_key, alias)
        assert type_key is not None
        data = self.body()
        instance_id = (
            validation.instance_id(data["workflow_id"]) if "workflow_id" in data else uuid7().hex
        )
        policy = data.get("on_duplicate", DuplicateStartPolicy.RETURN_EXISTING_ACTIVE.value)
        if policy != DuplicateStartPolicy.RETURN_EXISTING_ACTIVE.value:
            raise validation.invalid_field(
                "on_duplicate", "Signal-with-start only allows on_duplicate=return_existing_active."
            )
        signal_arguments = validation.array(data, "signal_arguments")
        options = validation.start_options(data, DuplicateStartPolicy.RETURN_EXISTING_ACTIVE)
        reserved = _START_FIELDS | {"signal_arguments"}
        arguments = validation.handle_arguments(
            cls, {k: v for k, v in data.items() if k not in reserved}
        )
        validation.ensure_encodable(arguments)
        validation.ensure_encodable(signal_arguments, "signal_arguments")
        if _held_by_another_type(instance_id, type_key, namespace=self.namespace):
            return _start_response(instance_id, type_key, None)
        outcome = intake.signal_with_start(
            instance_id=instance_id,
            workflow_type=type_key,
            signal_name=signal,
            signal_arguments=signal_arguments,
            start_arguments=arguments,
            options=options,
            source=responses.COMMAND_SOURCE,
            request_id=self.request_id(),
            namespace=self.namespace,
            **_routing(cls),
        )
        start, sent = outcome.start, outcome.signal
        self.ingress([start.command_id if start else None, sent.command_id], data)
        document = responses.command_envelope(
            outcome=sent.outcome,
            accepted=sent.accepted,
            workflow_id=instance_id,
            run_id=str(sent.run_id) if sent.run_id and start is not None else None,
            command_id=str(sent.command_id),
            workflow_type=type_key,
            rejection_reason=sent.rejection_reason,
            metadata=sent.metadata,
            command_sequence=records.command_sequence(sent.command_id),
        )
        document.update(
            _linked_start(start), intake_group_id=records.intake_group_id(sent.command_id)
        )
        status = responses.status_of(sent.outcome, accepted=sent.accepted)
        return responses.json_response(document, status)


def _linked_start(start: Any) -> dict[str, Any]:
    """The ``start_*`` fields of a linked intake (all ``None`` when nothing started)."""
    return {
        "start_command_id": str(start.command_id) if start else None,
        "start_command_sequence": records.command_sequence(start.command_id) if start else None,
        "start_outcome": start.outcome if start else None,
        "start_command_status": (
            ("accepted" if start.accepted else "rejected") if start is not None else None
        ),
    }


class UpdateWithStartView(WebhookView):
    """``POST start/<alias>/updates/<update>``: start unless the duplicate policy says
    otherwise (``return_existing_active`` by default), then submit the update, atomically;
    waits for it like the update route."""

    def post(self, request: HttpRequest, alias: str, update: str) -> HttpResponse:
        type_key = exposure.type_for_alias(alias, self.workflows)
        cls = _workflow_class(type_key, alias)
        assert type_key is not None
        data = self.body()
        instance_id = (
            validation.instance_id(data["workflow_id"]) if "workflow_id" in data else uuid7().hex
        )
        policy = validation.on_duplicate(data.get("on_duplicate", "return_existing_active"))
        options = validation.start_options(data, policy)
        update_arguments = validation.arguments(data, "update_arguments")
        wait_for, timeout = validation.wait_options(data, self.config)
        reserved = _START_FIELDS | {"update_arguments", "wait_for", "wait_timeout_seconds"}
        arguments = validation.handle_arguments(
            cls, {k: v for k, v in data.items() if k not in reserved}
        )
        validation.ensure_encodable(arguments)
        validation.ensure_encodable(update_arguments, "update_arguments")
        if _held_by_another_type(instance_id, type_key, namespace=self.namespace):
            return _start_response(instance_id, type_key, None)
        outcome = updates.update_with_start(
            instance_id=instance_id,
            workflow_type=type_key,
            update_name=update,
            update_arguments=update_arguments,
            start_arguments=arguments,
            options=options,
            source=responses.COMMAND_SOURCE,
            request_id=self.request_id(),
            namespace=self.namespace,
            **_routing(cls),
        )
        start, submitted = outcome.start, outcome.update
        self.ingress(
            [start.command_id if start else None, submitted and submitted.command_id], data
        )
        if submitted is None:  # the start was refused: nothing was submitted
            return _start_response(instance_id, type_key, start)
        wait = {"wait_for": wait_for, "wait_timed_out": False, "wait_timeout_seconds": timeout}
        document, status = update_document(
            instance_id, type_key, submitted, wait, self.config, namespace=self.namespace
        )
        document.update(_linked_start(start))
        document["intake_group_id"] = records.intake_group_id(submitted.command_id)
        return responses.json_response(document, status)


_CONTROL_FIELDS = {
    "workflow_type",
    "instance_id",
    "arguments",
    "connection",
    "queue",
    "business_key",
    "labels",
    "memo",
    "duplicate_start_policy",
    "deduplication_id",
}


def _control_arguments(cls: type, value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except (ValueError, RecursionError):
            raise validation.invalid_field(
                "arguments", "The arguments are not valid JSON."
            ) from None
    if isinstance(value, dict):
        return validation.handle_arguments(cls, value)
    if not isinstance(value, list):
        raise validation.invalid_field("arguments", "The arguments must be a list or an object.")
    try:
        contracts.bind_signature(cls.handle, value)  # type: ignore[attr-defined]
    except contracts.ArgumentsInvalid as exc:
        raise validation.RequestInvalid(
            "The workflow arguments are invalid.", exc.errors, "invalid_arguments"
        ) from None
    return value


def _optional_name(data: dict[str, Any], field: str) -> str | None:
    value = data.get(field)
    if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 255):
        raise validation.invalid_field(field, f"The {field} field must be a short string.")
    return value


def _control_routing(cls: type, data: dict[str, Any], config: WebhookSettings) -> dict[str, Any]:
    """The workflow's own queue and connection, or others the allow-lists name.

    A caller must not steer work onto a queue (or broker) the operator did not
    mean it to reach: a worker pool with other privileges, or one nobody serves.
    """
    routing = _routing(cls)
    choices = (
        ("queue", routing["queue"] or get_settings().DEFAULT_QUEUE, config.CONTROL_PLANE_QUEUES),
        ("connection", routing["connection"], config.CONTROL_PLANE_CONNECTIONS),
    )
    for field, own, allowed in choices:
        value = _optional_name(data, field)
        if value is None or value == own:
            continue
        if value not in allowed:
            message = f"The {field} [{value}] is not allowed for control-plane starts."
            raise validation.RequestInvalid(message, {field: [message]}, f"{field}_not_allowed")
        routing[field] = value
    return routing


class ControlPlaneStartView(WebhookView):
    """``POST control-plane/start``: start an exposed workflow by its durable type key."""

    def post(self, request: HttpRequest) -> HttpResponse:
        data = self.body()
        validation.refuse_unknown(data, _CONTROL_FIELDS)
        type_key = data.get("workflow_type")
        if not isinstance(type_key, str) or not type_key:
            raise validation.invalid_field("workflow_type", "The workflow_type field is required.")
        if not exposure.is_exposed(type_key, self.workflows):
            raise Respond(
                responses.not_found("unknown_workflow_type", f"[{type_key}] is not exposed.")
            )
        cls = _workflow_class(type_key, type_key)
        instance_id = (
            validation.instance_id(data["instance_id"], "instance_id")
            if data.get("instance_id") is not None
            else uuid7().hex
        )
        policy = validation.on_duplicate(
            data.get("duplicate_start_policy", "reject_duplicate"), "duplicate_start_policy"
        )
        visibility = {k: data[k] for k in ("business_key", "labels", "memo") if k in data}
        options = dataclasses.replace(
            validation.start_options({"visibility": visibility}, policy),
            request_id=self.request_id(),
        ).with_deduplication_id(validation.deduplication_id(data))
        arguments = _control_arguments(cls, data.get("arguments", []))
        validation.ensure_encodable(arguments)
        routing = _control_routing(cls, data, self.config)
        if _held_by_another_type(instance_id, type_key, namespace=self.namespace):
            document = _control_document(instance_id, type_key, None, None)
            return responses.json_response(document, 409)
        outcome = start_workflow(
            instance_id=instance_id,
            workflow_type=type_key,
            arguments=arguments,
            options=options,
            source=responses.COMMAND_SOURCE,
            namespace=self.namespace,
            **routing,
        )
        self.ingress([outcome.command_id], data)
        task_id = records.first_workflow_task_id(outcome.run_id) if outcome.accepted else None
        document = _control_document(instance_id, type_key, outcome, task_id)
        status = responses.status_of(outcome.outcome, accepted=outcome.accepted)
        return responses.json_response(document, status)


def _control_document(
    instance_id: str, type_key: str, outcome: Any, task_id: str | None
) -> dict[str, Any]:
    return {
        "started": outcome is not None and outcome.outcome == "started_new",
        "workflow_instance_id": instance_id,
        "workflow_run_id": str(outcome.run_id) if outcome is not None and outcome.run_id else None,
        "workflow_type": type_key,
        "outcome": outcome.outcome if outcome is not None else "rejected_duplicate",
        "task_id": task_id if outcome is not None and outcome.outcome == "started_new" else None,
        "reason": outcome.rejection_reason if outcome is not None else "instance_already_started",
        "command_id": str(outcome.command_id) if outcome is not None else None,
    }
