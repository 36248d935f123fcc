"""Signal, cancel, terminate, repair and archive, by instance or by run."""

from __future__ import annotations

from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse

from durable_workflow import clock
from durable_workflow.executor import archiving, closing, control, intake
from durable_workflow.models import CommandStatus, CommandType
from durable_workflow.store import commands, database, runs
from durable_workflow.store.records import InstanceRecord, RunRecord
from durable_workflow.webhooks import records, responses, validation
from durable_workflow.webhooks.views.base import WebhookView


def command_response(
    instance: InstanceRecord,
    selected: RunRecord | None,
    outcome: Any,
    *,
    run_id: Any = None,
    **extra: Any,
) -> HttpResponse:
    """The envelope of a signal/cancel/terminate/repair outcome, with its status code."""
    run = getattr(outcome, "run_id", run_id)
    document = responses.command_envelope(
        outcome=outcome.outcome,
        accepted=outcome.accepted,
        workflow_id=instance.instance_id,
        run_id=str(run) if run else None,
        command_id=str(outcome.command_id),
        workflow_type=instance.workflow_type,
        rejection_reason=outcome.rejection_reason,
        metadata=getattr(outcome, "metadata", None),
        target_scope="run" if selected is not None else "instance",
        requested_run_id=str(selected.id) if selected is not None else None,
        command_sequence=records.command_sequence(outcome.command_id),
    )
    document.update(extra)
    status = responses.status_of(outcome.outcome, accepted=outcome.accepted)
    return responses.json_response(document, status)


class SignalView(WebhookView):
    """``POST instances/<id>[/runs/<run>]/signals/<signal>`` with ``{"arguments": [...]}``."""

    def post(
        self, request: HttpRequest, instance_id: str, signal: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        data = self.body()
        validation.refuse_unknown(data, {"arguments"})
        arguments = validation.array(data, "arguments")
        validation.ensure_encodable(arguments)
        outcome = intake.send_signal(
            instance.instance_id,
            signal,
            arguments,
            run_id=selected.id if selected else None,
            source=responses.COMMAND_SOURCE,
            request_id=self.request_id(),
            namespace=self.namespace,
        )
        self.ingress([outcome.command_id], data)
        return command_response(instance, selected, outcome)


class CloseView(WebhookView):
    """``POST .../cancel``, ``.../terminate`` and ``.../archive`` with an optional
    ``{"reason": ...}``."""

    kind: ClassVar[str] = "cancel"

    def post(
        self, request: HttpRequest, instance_id: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        data = self.body()
        validation.refuse_unknown(data, {"reason"})
        reason = validation.reason(data, self.config)
        command = {
            "cancel": closing.request_cancel,
            "terminate": closing.request_terminate,
            "archive": archiving.request_archive,
        }[self.kind]
        outcome = command(
            instance.instance_id,
            run_id=selected.id if selected else None,
            reason=reason,
            source=responses.COMMAND_SOURCE,
            request_id=self.request_id(),
            namespace=self.namespace,
        )
        self.ingress([outcome.command_id], data)
        return command_response(instance, selected, outcome, reason=reason)


class CancelView(CloseView):
    kind = "cancel"


class TerminateView(CloseView):
    kind = "terminate"


class ArchiveView(CloseView):
    """``POST .../archive``: archive the instance's closed runs, or the one closed run the
    route names (409 while it is open)."""

    kind = "archive"


class _Rejected:
    """A repair refused before the executor saw it (the run is not current)."""

    accepted = False
    outcome = "rejected_not_current"
    rejection_reason = "selected_run_not_current"

    def __init__(self, command_id: Any, run_id: Any, metadata: dict[str, Any]):
        self.command_id = command_id
        self.run_id = run_id
        self.metadata = metadata


class RepairView(WebhookView):
    """``POST .../repair``: re-create a lost task or re-send a ready one."""

    def post(
        self, request: HttpRequest, instance_id: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        data = self.body()
        validation.refuse_unknown(data, {"reason"})
        reason = validation.reason(data, self.config) or ""
        request_id = self.request_id()
        current = runs.current_run(instance.instance_id, namespace=instance.namespace)
        if selected is not None and current is not None and current.id != selected.id:
            outcome: Any = self._reject_historical(instance, selected, current, reason, request_id)
        else:
            outcome = control.request_repair(
                instance.instance_id,
                source=responses.COMMAND_SOURCE,
                reason=reason,
                request_id=request_id,
                namespace=instance.namespace,
            )
        self.ingress([outcome.command_id], data)
        return command_response(instance, selected, outcome, run_id=current.id if current else None)

    @staticmethod
    def _reject_historical(
        instance: InstanceRecord,
        selected: RunRecord,
        current: RunRecord,
        reason: str,
        request_id: str | None,
    ) -> Any:
        metadata = {"requested_run_id": str(selected.id), "resolved_run_id": str(current.id)}
        with database.atomic():
            if request_id is not None:
                runs.lock_instance(instance.instance_id, namespace=instance.namespace)
                repeated = control.repeated_repair(
                    instance.instance_id, request_id, namespace=instance.namespace
                )
                if repeated is not None:
                    return repeated
            command = commands.record_command(
                namespace=instance.namespace,
                instance_id=instance.instance_id,
                run_id=current.id,
                command_type=CommandType.REPAIR,
                status=CommandStatus.REJECTED,
                outcome=_Rejected.outcome,
                rejection_reason=_Rejected.rejection_reason,
                source=responses.COMMAND_SOURCE,
                reason=reason,
                payload={} if request_id is None else {"request_id": request_id},
                metadata=metadata,
                now=clock.now(),
            )
        return _Rejected(command.id, current.id, metadata)
