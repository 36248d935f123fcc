"""Activity completion routes: complete, fail, heartbeat or cancel an attempt by its token.

``POST activities/{complete,fail,heartbeat,report-cancellation}`` with the task
token in the body (never in the path: it is a credential and paths get logged).
The token's activity must belong to an exposed workflow type; anything else
answers 404 exactly like a token that names nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from durable_workflow.engine.commands import FailureInfo
from durable_workflow.executor import async_completion
from durable_workflow.executor.async_completion import Report
from durable_workflow.executor.heartbeat import HeartbeatProgressError, check_progress
from durable_workflow.models import FailureCategory
from durable_workflow.text import check_name
from durable_workflow.webhooks import exposure, responses, validation
from durable_workflow.webhooks.views.base import Respond, WebhookView

_NOT_FOUND = {"rejected_invalid_token", "rejected_not_found"}


def _document(report: Report) -> HttpResponse:
    document = {
        "outcome": report.outcome,
        "accepted": report.accepted,
        "rejection_reason": report.rejection_reason,
        "activity_id": report.activity_id,
        "workflow_id": report.workflow_instance_id,
        "cancel_requested": report.cancel_requested,
    }
    status = 200 if report.accepted else 404 if report.outcome in _NOT_FOUND else 409
    return responses.json_response(document, status)


class ActivityReportView(WebhookView):
    """Base: checks the body, then the token, then makes one report."""

    fields: frozenset[str] = frozenset({"task_token"})

    def post(self, request: HttpRequest) -> HttpResponse:
        data = self.body()
        validation.refuse_unknown(data, set(self.fields))
        token = data.get("task_token")
        if not isinstance(token, str) or not token:
            raise validation.invalid_field("task_token", "The task_token field is required.")
        report = self.parse(data)  # the whole body is checked before the token is read
        owner = async_completion.owner_type(token)
        if owner is None or not exposure.is_exposed(owner, self.workflows):
            raise Respond(_document(Report(False, "rejected_not_found", "activity_not_found")))
        return _document(report(token))

    def parse(self, data: dict[str, Any]) -> Callable[[str], Report]:
        """The report the body asks for, once its token is known."""
        raise NotImplementedError


class CompleteActivityView(ActivityReportView):
    fields = frozenset({"task_token", "result"})

    def parse(self, data: dict[str, Any]) -> Callable[[str], Report]:
        result = data.get("result")
        validation.ensure_encodable(result, "result")
        return lambda token: async_completion.complete(token, result)


class FailActivityView(ActivityReportView):
    fields = frozenset({"task_token", "error"})

    def parse(self, data: dict[str, Any]) -> Callable[[str], Report]:
        info = _failure(data.get("error"))
        return lambda token: async_completion.fail(token, info)


class HeartbeatActivityView(ActivityReportView):
    fields = frozenset({"task_token", "details"})

    def parse(self, data: dict[str, Any]) -> Callable[[str], Report]:
        try:
            progress = check_progress(data.get("details"))
        except HeartbeatProgressError as exc:
            raise validation.invalid_field("details", str(exc)) from None
        return lambda token: async_completion.heartbeat(token, progress)


class CancelledActivityView(ActivityReportView):
    def parse(self, data: dict[str, Any]) -> Callable[[str], Report]:
        return async_completion.report_cancellation


def _failure(error: Any) -> FailureInfo:
    """``{"message": ..., "type": ..., "non_retryable": false}`` as a failure."""
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        raise validation.invalid_field("error", "The error field needs a message string.")
    validation.refuse_unknown(error, {"message", "type", "non_retryable"})
    message = error["message"]
    if not message or len(message) > 10_000 or not validation.storable_text(message):
        raise validation.invalid_field("error", "The error message must be storable text.")
    kind = error.get("type") or "ActivityError"
    try:
        check_name(kind, field="error type")
    except ValueError as exc:
        raise validation.invalid_field("error", str(exc)) from None
    if not isinstance(error.get("non_retryable", False), bool):
        raise validation.invalid_field("error", "non_retryable must be true or false.")
    return FailureInfo(
        exception_type=kind,
        exception_class="",
        message=message,
        category=FailureCategory.ACTIVITY,
        non_retryable=bool(error.get("non_retryable", False)),
    )
