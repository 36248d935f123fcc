"""Update routes: submit (and wait, bounded) by POST, read the lifecycle by GET."""

from __future__ import annotations

import json
import time
from typing import Any

from django.http import HttpRequest, HttpResponse

from durable_workflow.conf import get_settings
from durable_workflow.executor import updates
from durable_workflow.models import UpdateStatus, WorkflowUpdate
from durable_workflow.store import runs
from durable_workflow.store.records import InstanceRecord, RunRecord
from durable_workflow.webhooks import records, responses, validation
from durable_workflow.webhooks.conf import WebhookSettings
from durable_workflow.webhooks.views.base import Respond, WebhookView

_UPDATE_STATUS = {"completed": 200, "failed": 422, "accepted": 202}


def _wait_until_closed(update_id: Any, timeout: float, poll_ms: int) -> bool:
    """Poll the update row until the worker closes it; False when the budget runs out."""
    deadline = time.monotonic() + timeout
    while True:
        status = WorkflowUpdate.objects.filter(id=update_id).values_list("status", flat=True)
        if status.first() != UpdateStatus.ACCEPTED:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(max(poll_ms, 1) / 1000)


def _document(
    instance: InstanceRecord,
    selected: RunRecord | None,
    row: WorkflowUpdate,
    *,
    wait: dict[str, Any],
    lookup: bool = False,
) -> tuple[dict[str, Any], int]:
    command = row.command
    accepted = command.status == "accepted"
    document = responses.command_envelope(
        outcome=None,
        accepted=accepted,
        workflow_id=instance.instance_id,
        run_id=str(row.run_id) if row.run_id else None,
        command_id=str(command.id),
        workflow_type=instance.workflow_type,
        rejection_reason=command.rejection_reason,
        metadata=command.metadata,
        target_scope="run" if selected is not None else "instance",
        requested_run_id=str(selected.id) if selected is not None else None,
        command_sequence=records.command_sequence(command.id),
    )
    document.update(records.update_fields(row))
    document.update(wait)
    document["validation_errors"] = (command.metadata or {}).get("validation_errors") or []
    if lookup:  # a lookup reports the lifecycle, not the command: open 202, closed 200
        return document, 202 if row.status == UpdateStatus.ACCEPTED else 200
    if row.status == UpdateStatus.REJECTED:
        return document, responses.status_of(command.outcome, accepted=False)
    return document, _UPDATE_STATUS.get(row.status, 200)


def update_document(
    instance_id: str,
    workflow_type: str,
    outcome: Any,
    wait: dict[str, Any],
    config: WebhookSettings,
    *,
    namespace: str,
) -> tuple[dict[str, Any], int]:
    """The answer to a submitted update (waiting first, as ``wait`` says): the update
    document, or a refusal's envelope when no run took it."""
    instance = runs.get_instance(instance_id, namespace=namespace)
    assert instance is not None
    if outcome.record is None:
        response = UpdateView.not_started(instance, None, outcome, wait)
        return json.loads(response.content), response.status_code
    if outcome.record.status == UpdateStatus.ACCEPTED and wait["wait_timeout_seconds"] is not None:
        poll = config.UPDATE_POLL_INTERVAL_MS or get_settings().UPDATE_POLL_INTERVAL_MS
        wait["wait_timed_out"] = not _wait_until_closed(
            outcome.record.id, wait["wait_timeout_seconds"], poll
        )
    row = WorkflowUpdate.objects.select_related("command").get(id=outcome.record.id)
    return _document(instance, None, row, wait=wait)


class UpdateView(WebhookView):
    """``POST instances/<id>[/runs/<run>]/updates/<name>`` and ``GET .../updates/<update_id>``."""

    http_method_names = ["get", "post", "options"]

    def post(
        self, request: HttpRequest, instance_id: str, name: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        data = self.body()
        validation.refuse_unknown(data, {"arguments", "wait_for", "wait_timeout_seconds"})
        arguments = validation.arguments(data)
        validation.ensure_encodable(arguments)
        wait_for, timeout = validation.wait_options(data, self.config)
        outcome = updates.submit_update(
            instance.instance_id,
            name,
            arguments,
            run_id=selected.id if selected else None,
            source=responses.COMMAND_SOURCE,
            request_id=self.request_id(),
            namespace=self.namespace,
        )
        self.ingress([outcome.command_id], data)
        wait = {"wait_for": wait_for, "wait_timed_out": False, "wait_timeout_seconds": timeout}
        if outcome.record is None:
            return self.not_started(instance, selected, outcome, wait)
        if outcome.record.status == UpdateStatus.ACCEPTED and timeout is not None:
            poll = self.config.UPDATE_POLL_INTERVAL_MS or get_settings().UPDATE_POLL_INTERVAL_MS
            wait["wait_timed_out"] = not _wait_until_closed(outcome.record.id, timeout, poll)
        row = WorkflowUpdate.objects.select_related("command").get(id=outcome.record.id)
        document, status = _document(instance, selected, row, wait=wait)
        return responses.json_response(document, status)

    def get(
        self, request: HttpRequest, instance_id: str, name: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        row = records.find_update(name, instance.instance_id, selected.id if selected else None)
        if row is None:
            raise Respond(
                responses.not_found(
                    "update_not_found",
                    f"Update [{name}] of workflow [{instance.instance_id}] was not found.",
                    workflow_id=instance.instance_id,
                )
            )
        wait = {"wait_for": "status", "wait_timed_out": False, "wait_timeout_seconds": None}
        document, status = _document(instance, selected, row, wait=wait, lookup=True)
        return responses.json_response(document, status)

    @staticmethod
    def not_started(
        instance: InstanceRecord, selected: RunRecord | None, outcome: Any, wait: dict[str, Any]
    ) -> HttpResponse:
        document = responses.command_envelope(
            outcome=outcome.outcome,
            accepted=False,
            workflow_id=instance.instance_id,
            run_id=None,
            command_id=str(outcome.command_id),
            workflow_type=instance.workflow_type,
            rejection_reason=outcome.rejection_reason,
            metadata=outcome.metadata,
            target_scope="run" if selected is not None else "instance",
            requested_run_id=str(selected.id) if selected is not None else None,
        )
        empty = dict.fromkeys(
            ("update_id", "update_status", "workflow_sequence", "accepted_at", "applied_at"),
            None,
        )
        document.update(empty, update_name=None, rejected_at=None, closed_at=None)
        document.update(wait, result=None, failure_id=None, failure_message=None)
        document["validation_errors"] = []
        status = responses.status_of(outcome.outcome, accepted=False)
        return responses.json_response(document, status)
