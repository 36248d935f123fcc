"""Operator actions: the client's commands, with the operator's reason, from the admin.

Each action resolves to an ``(instance_id, run_id)`` target and calls the
executor exactly like ``WorkflowStub`` does (``source="admin"``). Run pages
pin the run (a stale run is rejected as ``rejected_not_current``); instance
pages act on the instance's current run.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

from django import forms
from django.http import HttpRequest

from durable_workflow import registry
from durable_workflow.admin.base import OPERATE_PERMISSION, TERMINATE_PERMISSION
from durable_workflow.admin.rewind import ForkForm, ResetForm, rewind
from durable_workflow.admin.targets import Outcome, ReasonForm, Target
from durable_workflow.client import WorkflowStub
from durable_workflow.exceptions import (
    InvalidValueError,
    QueryFailedError,
    WorkflowNotFoundError,
)
from durable_workflow.executor import archiving, closing, control, intake, updates
from durable_workflow.logs import get_logger
from durable_workflow.models import TERMINAL_RUN_STATUSES, Task, TaskType, WorkflowRun

logger = get_logger("durable_workflow")


@dataclasses.dataclass(frozen=True)
class Operation:
    kind: str
    label: str
    permission: str
    help: str


OPERATIONS = {
    "cancel": Operation(
        "cancel",
        "Cancel",
        OPERATE_PERMISSION,
        "The body sees WorkflowCancelled at its next step and may clean up before it closes.",
    ),
    "terminate": Operation(
        "terminate",
        "Terminate",
        TERMINATE_PERMISSION,
        "The run closes at once; no more workflow code runs.",
    ),
    "repair": Operation(
        "repair",
        "Repair",
        OPERATE_PERMISSION,
        "Re-create a lost workflow task or re-send ready task messages.",
    ),
    "retry": Operation(
        "retry",
        "Retry failed workflow task",
        OPERATE_PERMISSION,
        "After fixing the code a workflow task failed on, replay the run again (a repair "
        "of a run whose latest workflow task failed). A failed run stays failed: workflows "
        "have no run-level retry.",
    ),
    "signal": Operation(
        "signal",
        "Send signal",
        OPERATE_PERMISSION,
        "Deliver a declared signal with JSON arguments.",
    ),
    "query": Operation(
        "query",
        "Query",
        OPERATE_PERMISSION,
        "Ask the run's state through a declared query, with JSON arguments; the answer is "
        "shown here. The run is replayed from its history in this web process.",
    ),
    "update": Operation(
        "update",
        "Send update",
        OPERATE_PERMISSION,
        "Submit a declared update with JSON arguments. Its validator's verdict is shown "
        "here; a worker applies an accepted update and its result appears on the timeline.",
    ),
    "reset": Operation(
        "reset",
        "Reset (rewind)",
        TERMINATE_PERMISSION,
        "Start a new run of the instance from a point of this run's history: the history "
        "before that point is replayed, the rest runs again with the current code, signals "
        "received after the point are re-applied. An open run is terminated (reason "
        "'reset'). A point that cannot be resumed is refused with the reason.",
    ),
    "fork": Operation(
        "fork",
        "Fork",
        OPERATE_PERMISSION,
        "A reset into a new instance: this run is left exactly as it is.",
    ),
    "archive": Operation(
        "archive",
        "Archive",
        OPERATE_PERMISSION,
        "Mark the closed run archived (an instance: all its closed runs): it leaves the "
        "default runs list and stays readable; nothing is deleted. Open runs are refused.",
    ),
}

#: Operations that read or write one run at a time only (no changelist bulk action).
SINGLE_RUN_ONLY = ("query", "fork")
#: Operations a closed run still answers.
ON_CLOSED_RUNS = ("query", "reset", "fork", "archive")
#: Operations ``admin.rewind`` carries out.
REWIND = ("reset", "fork")
#: Operations only a closed run takes (no button on an open run's page).
ONLY_ON_CLOSED_RUNS = ("archive",)
#: The longest answer a query shows (the rest is cut).
MAX_ANSWER_CHARS = 4000


def _handler_names(workflow_types: set[str], attribute: str) -> list[str]:
    """The declared signal, query or update names of these workflow types."""
    names: set[str] = set()
    for type_key in workflow_types:
        try:
            cls = registry.workflow_class(type_key)
        except Exception:
            continue
        names |= set(getattr(cls, attribute, {}) or {})
    return sorted(names)


class MessageForm(ReasonForm):
    """A signal, query or update: a declared name and JSON arguments."""

    name_field = "signal_name"
    names_attribute = "_dw_signal_contracts"
    label = "Signal"
    arguments = forms.CharField(
        label="Arguments",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        initial="[]",
        required=False,
        help_text="JSON: a list of positional arguments or an object of named ones (empty: none).",
    )

    def __init__(self, *args: Any, workflow_types: set[str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        names = _handler_names(workflow_types or set(), self.names_attribute)
        if names:
            field: forms.Field = forms.ChoiceField(
                label=self.label, choices=[(n, n) for n in names]
            )
        else:  # types this process does not know: any name, checked by the engine
            field = forms.CharField(label=self.label, max_length=255)
        self.fields[self.name_field] = field
        self.order_fields([self.name_field, "arguments", "reason"])

    def clean_arguments(self) -> Any:
        try:
            value = json.loads(self.cleaned_data["arguments"] or "[]")
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None
        except RecursionError:  # brackets nested deeper than the parser goes
            raise forms.ValidationError("not valid JSON: nested too deeply") from None
        if not isinstance(value, list | dict):
            raise forms.ValidationError("use a JSON list or object")
        return value


class SignalForm(MessageForm):
    pass


class QueryForm(MessageForm):
    name_field = "query_name"
    names_attribute = "_dw_queries"
    label = "Query"


class UpdateForm(MessageForm):
    name_field = "update_name"
    names_attribute = "_dw_updates"
    label = "Update"


MESSAGE_FORMS: dict[str, type[MessageForm]] = {
    "signal": SignalForm,
    "query": QueryForm,
    "update": UpdateForm,
}


def form_for(kind: str, data: Any = None, *, workflow_types: set[str] | None = None) -> Any:
    if kind in REWIND:
        return ForkForm(data) if kind == "fork" else ResetForm(data)
    if kind in MESSAGE_FORMS:
        return MESSAGE_FORMS[kind](data, workflow_types=workflow_types)
    return ReasonForm(data)


def _has_failed_workflow_task(run_id: uuid.UUID) -> bool:
    latest = (
        Task.objects.filter(run_id=run_id, task_type=TaskType.WORKFLOW)
        .order_by("-created_at", "-id")
        .values_list("status", flat=True)
        .first()
    )
    return latest == "failed"


def _current_run_id(instance_id: str, namespace: str) -> uuid.UUID | None:
    return (
        WorkflowRun.objects.filter(namespace=namespace, instance_id=instance_id)
        .order_by("-run_number")
        .values_list("id", flat=True)
        .first()
    )


def _repair(target: Target, reason: str, *, retry: bool) -> Outcome:
    current = _current_run_id(target.instance_id, target.namespace)
    if target.run_id is not None and target.run_id != current:
        return Outcome(target, False, "rejected_not_current", "selected_run_not_current")
    if retry:
        status = (
            None
            if current is None
            else WorkflowRun.objects.filter(id=current).values_list("status", flat=True).first()
        )
        if current is None or status in TERMINAL_RUN_STATUSES:
            return Outcome(target, False, "rejected_not_active", "run_not_active")
        if not _has_failed_workflow_task(current):
            return Outcome(target, False, "retry_not_applicable", "no_failed_workflow_task")
    result = control.request_repair(
        target.instance_id, source="admin", reason=reason, namespace=target.namespace
    )
    return Outcome(target, result.accepted, result.outcome, result.rejection_reason)


def _query(target: Target, data: dict[str, Any]) -> Outcome:
    """Answer the query on the run (pinned) or the instance's current run."""
    if target.run_id is not None:
        stub = WorkflowStub.load_run(target.run_id)
    else:
        stub = WorkflowStub.load(target.instance_id, namespace=target.namespace)
    try:
        answer = stub.query_with_arguments(data["query_name"], data["arguments"])
    except QueryFailedError as exc:
        return Outcome(target, False, "query_failed", f"{exc.reason}: {exc}"[:1000])
    try:
        text = json.dumps(answer, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a value JSON cannot hold (a cycle, a NaN key...)
        text = repr(answer)
    if len(text) > MAX_ANSWER_CHARS:
        text = text[:MAX_ANSWER_CHARS] + " …(cut)"
    return Outcome(target, True, "answered", detail=text)


def _update(target: Target, data: dict[str, Any], reason: str, operator: str) -> Outcome:
    """Submit the update; the outcome is the validator's verdict (accepted or why not)."""
    submitted = updates.submit_update(
        target.instance_id,
        data["update_name"],
        data["arguments"],
        run_id=target.run_id,
        source="admin",
        metadata={"reason": reason, "operator": operator},
        namespace=target.namespace,
    )
    accepted = submitted.record is not None and submitted.rejection_reason is None
    errors = submitted.metadata.get("validation_errors") if submitted.metadata else None
    detail = f"validation errors: {errors}" if errors else None
    return Outcome(
        target,
        accepted,
        submitted.outcome or ("accepted" if accepted else "rejected"),
        submitted.rejection_reason,
        detail=detail,
    )


def preview(kind: str, target: Target, data: dict[str, Any] | None = None) -> Outcome:
    """What ``perform`` would decide, read without writing anything (a dry run): the
    instance exists, the run is its current one, still open, and (retry) parked; a
    reset or fork checks its point (``data``: the form's)."""
    if kind in REWIND:
        return rewind(kind, target, data or {}, dry_run=True)
    if kind == "archive":
        return _preview_archive(target)
    current = (
        WorkflowRun.objects.filter(namespace=target.namespace, instance_id=target.instance_id)
        .order_by("-run_number")
        .values_list("id", "status")
        .first()
    )
    if current is None:
        return Outcome(target, False, "not_found", "instance_not_found")
    run_id, status = current
    if target.run_id is not None and target.run_id != run_id:
        if kind == "query":
            return Outcome(target, True, "would_answer")
        return Outcome(target, False, "rejected_not_current", "selected_run_not_current")
    if kind == "query":
        return Outcome(target, True, "would_answer")
    if status in TERMINAL_RUN_STATUSES:
        return Outcome(target, False, "rejected_not_active", "run_not_active")
    if kind == "retry" and not _has_failed_workflow_task(run_id):
        return Outcome(target, False, "retry_not_applicable", "no_failed_workflow_task")
    return Outcome(target, True, f"would_{kind}")


def _preview_archive(target: Target) -> Outcome:
    """An archive's verdict, read only (``operations.archiving.preview``)."""
    from durable_workflow.operations.archiving import preview as archive_preview

    accepted, outcome, reason = archive_preview(
        target.instance_id, target.run_id, namespace=target.namespace
    )
    return Outcome(target, accepted, outcome, reason)


def perform(kind: str, target: Target, data: dict[str, Any], request: HttpRequest) -> Outcome:
    """Run one operator command; the result says what the engine decided."""
    return perform_as(kind, target, data, operator=request.user.get_username())


def perform_as(
    kind: str,
    target: Target,
    data: dict[str, Any],
    *,
    operator: str,
    request_id: str | None = None,
) -> Outcome:
    """``perform`` for ``operator`` outside a request (a bulk job). ``request_id`` makes
    a cancel, terminate or archive idempotent: a second command with it is answered
    from the first."""
    reason = data["reason"]
    try:
        if kind in ("cancel", "terminate"):
            command = closing.request_cancel if kind == "cancel" else closing.request_terminate
            result = command(
                target.instance_id,
                run_id=target.run_id,
                reason=reason,
                source="admin",
                request_id=request_id,
                namespace=target.namespace,
            )
            outcome = Outcome(target, result.accepted, result.outcome, result.rejection_reason)
        elif kind == "archive":
            result = archiving.request_archive(
                target.instance_id,
                run_id=target.run_id,
                reason=reason,
                source="admin",
                request_id=request_id,
                namespace=target.namespace,
            )
            outcome = Outcome(target, result.accepted, result.outcome, result.rejection_reason)
        elif kind in ("repair", "retry"):
            outcome = _repair(target, reason, retry=kind == "retry")
        elif kind in REWIND:
            outcome = rewind(kind, target, data, dry_run=False)
        elif kind == "query":
            outcome = _query(target, data)
        elif kind == "update":
            outcome = _update(target, data, reason, operator)
        elif kind == "signal":
            sent = intake.send_signal(
                target.instance_id,
                data["signal_name"],
                data["arguments"],
                run_id=target.run_id,
                source="admin",
                metadata={"reason": reason, "operator": operator},
                namespace=target.namespace,
            )
            outcome = Outcome(target, sent.accepted, sent.outcome, sent.rejection_reason)
        else:
            raise ValueError(f"unknown operation {kind!r}")
    except WorkflowNotFoundError:
        outcome = Outcome(target, False, "not_found", "instance_not_found")
    except InvalidValueError as exc:  # a hostile name or value, refused before any write
        outcome = Outcome(target, False, "rejected_invalid", str(exc)[:500])
    logger.info(
        "admin %s of %s by %s: %s",
        kind,
        target,
        operator,
        outcome.outcome,
        extra={
            "instance_id": target.instance_id,
            "run_id": str(target.run_id) if target.run_id else None,
            "dw_instance_id": target.instance_id,
            "dw_run_id": str(target.run_id) if target.run_id else None,
            "operator": operator,
            "operation": kind,
            "outcome": outcome.outcome,
        },
    )
    return outcome
