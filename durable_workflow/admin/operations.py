"""Operator actions: the client's commands, with the operator's reason, from the admin.

Each action resolves to an ``(instance_id, run_id)`` target and calls the
executor exactly like ``WorkflowStub`` does (``source="admin"``). Run pages
pin the run (a stale run is rejected as ``rejected_not_current``); instance
pages act on the instance's current run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from typing import Any

from django import forms
from django.http import HttpRequest

from durable_workflow import registry
from durable_workflow.admin.base import OPERATE_PERMISSION, TERMINATE_PERMISSION
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.executor import control, intake
from durable_workflow.models import TERMINAL_RUN_STATUSES, Task, TaskType, WorkflowRun

logger = logging.getLogger("durable_workflow")


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
}


@dataclasses.dataclass(frozen=True)
class Target:
    instance_id: str
    run_id: uuid.UUID | None = None

    def __str__(self) -> str:
        return self.instance_id if self.run_id is None else f"{self.instance_id} ({self.run_id})"


@dataclasses.dataclass(frozen=True)
class Outcome:
    target: Target
    accepted: bool
    outcome: str
    rejection_reason: str | None = None


class ReasonForm(forms.Form):
    reason = forms.CharField(
        label="Reason",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="Recorded on the command, for the audit trail.",
    )


def _signal_names(workflow_types: set[str]) -> list[str]:
    names: set[str] = set()
    for type_key in workflow_types:
        try:
            cls = registry.workflow_class(type_key)
        except Exception:
            continue
        names |= set(getattr(cls, "_dw_signal_contracts", {}) or {})
    return sorted(names)


class SignalForm(ReasonForm):
    signal_name = forms.CharField(label="Signal", max_length=255)
    arguments = forms.CharField(
        label="Arguments",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        initial="[]",
        help_text="JSON: a list of positional arguments or an object of named ones.",
    )

    def __init__(self, *args: Any, workflow_types: set[str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        names = _signal_names(workflow_types or set())
        if names:
            self.fields["signal_name"] = forms.ChoiceField(
                label="Signal", choices=[(n, n) for n in names]
            )
        self.order_fields(["signal_name", "arguments", "reason"])

    def clean_arguments(self) -> Any:
        try:
            value = json.loads(self.cleaned_data["arguments"] or "[]")
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None
        if not isinstance(value, list | dict):
            raise forms.ValidationError("use a JSON list or object")
        return value


def form_for(kind: str, data: Any = None, *, workflow_types: set[str] | None = None) -> Any:
    if kind == "signal":
        return SignalForm(data, workflow_types=workflow_types)
    return ReasonForm(data)


def _has_failed_workflow_task(run_id: uuid.UUID) -> bool:
    latest = (
        Task.objects.filter(run_id=run_id, task_type=TaskType.WORKFLOW)
        .order_by("-created_at", "-id")
        .values_list("status", flat=True)
        .first()
    )
    return latest == "failed"


def _current_run_id(instance_id: str) -> uuid.UUID | None:
    return (
        WorkflowRun.objects.filter(instance_id=instance_id)
        .order_by("-run_number")
        .values_list("id", flat=True)
        .first()
    )


def _repair(target: Target, reason: str, *, retry: bool) -> Outcome:
    current = _current_run_id(target.instance_id)
    if target.run_id is not None and target.run_id != current:
        return Outcome(target, False, "rejected_not_current", "selected_run_not_current")
    if retry:
        status = WorkflowRun.objects.filter(id=current).values_list("status", flat=True).first()
        if current is None or status in TERMINAL_RUN_STATUSES:
            return Outcome(target, False, "rejected_not_active", "run_not_active")
        if not _has_failed_workflow_task(current):
            return Outcome(target, False, "retry_not_applicable", "no_failed_workflow_task")
    result = control.request_repair(target.instance_id, source="admin", reason=reason)
    return Outcome(target, result.accepted, result.outcome, result.rejection_reason)


def perform(kind: str, target: Target, data: dict[str, Any], request: HttpRequest) -> Outcome:
    """Run one operator command; the result says what the engine decided."""
    reason = data["reason"]
    try:
        if kind in ("cancel", "terminate"):
            command = control.request_cancel if kind == "cancel" else control.request_terminate
            result = command(
                target.instance_id, run_id=target.run_id, reason=reason, source="admin"
            )
            outcome = Outcome(target, result.accepted, result.outcome, result.rejection_reason)
        elif kind in ("repair", "retry"):
            outcome = _repair(target, reason, retry=kind == "retry")
        elif kind == "signal":
            sent = intake.send_signal(
                target.instance_id,
                data["signal_name"],
                data["arguments"],
                run_id=target.run_id,
                source="admin",
                metadata={"reason": reason, "operator": request.user.get_username()},
            )
            outcome = Outcome(target, sent.accepted, sent.outcome, sent.rejection_reason)
        else:
            raise ValueError(f"unknown operation {kind!r}")
    except WorkflowNotFoundError:
        outcome = Outcome(target, False, "not_found", "instance_not_found")
    logger.info(
        "admin %s of %s by %s: %s",
        kind,
        target,
        request.user.get_username(),
        outcome.outcome,
        extra={
            "instance_id": target.instance_id,
            "run_id": str(target.run_id) if target.run_id else None,
            "operator": request.user.get_username(),
            "operation": kind,
            "outcome": outcome.outcome,
        },
    )
    return outcome
