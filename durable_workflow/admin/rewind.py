"""Reset and fork from the admin: the point form, the dry run and the command.

A reset acts on the run a row means (a run page pins it; an instance row means its
current run); ``executor.reset`` records the command (``source="admin"``) and
refuses a point that cannot be resumed (the outcome then carries the reason).
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from durable_workflow.admin.targets import Outcome, ReasonForm, Target
from durable_workflow.engine.rewind import POINT_KINDS, REFUSALS
from durable_workflow.exceptions import (
    InvalidInstanceIdError,
    InvalidValueError,
    ResetRefusedError,
    WorkflowNotFoundError,
)
from durable_workflow.executor.reset import reset_run
from durable_workflow.models import WorkflowRun

_POINTS = [
    ("first_failure", "First failure (before the first failed activity, child or run)"),
    ("last_workflow_task", "Last workflow task (before the run closed or was asked to)"),
    ("start", "Start (only the start is kept; signals are re-applied)"),
    ("event", "Before an event (the last workflow task before the event below)"),
]
assert {kind for kind, _ in _POINTS} == {*POINT_KINDS, "event"}


class ResetForm(ReasonForm):
    to = forms.ChoiceField(label="Reset point", choices=_POINTS, initial="first_failure")
    event = forms.IntegerField(
        label="Event",
        required=False,
        min_value=1,
        help_text="The event's sequence on the timeline (with 'Before an event').",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order_fields(["to", "event", "new_instance_id", "reason"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("to") == "event" and not data.get("event"):
            self.add_error("event", "give the event's sequence")
        return data


class ForkForm(ResetForm):
    new_instance_id = forms.CharField(
        label="New instance id", max_length=191, help_text="The fork's instance id (unused)."
    )


def point_of(data: dict[str, Any]) -> str | int:
    return int(data["event"]) if data["to"] == "event" else str(data["to"])


def _run_id(target: Target) -> uuid.UUID | None:
    if target.run_id is not None:
        return target.run_id
    return (
        WorkflowRun.objects.filter(namespace=target.namespace, instance_id=target.instance_id)
        .order_by("-run_number")
        .values_list("id", flat=True)
        .first()
    )


def rewind(kind: str, target: Target, data: dict[str, Any], *, dry_run: bool) -> Outcome:
    """Reset or fork (``kind``) the target's run; with ``dry_run`` only the check."""
    run_id = _run_id(target)
    if run_id is None:
        return Outcome(target, False, "not_found", "instance_not_found")
    try:
        result = reset_run(
            run_id,
            to=point_of(data),
            reason=data.get("reason", ""),
            new_instance_id=data.get("new_instance_id") if kind == "fork" else None,
            source="admin",
            dry_run=dry_run,
        )
    except ResetRefusedError as exc:
        return Outcome(
            target, False, f"{kind}_refused", exc.reason, detail=REFUSALS.get(exc.reason)
        )
    except WorkflowNotFoundError:
        return Outcome(target, False, "not_found", "run_not_found")
    except (InvalidValueError, InvalidInstanceIdError) as exc:
        return Outcome(target, False, "rejected_invalid", str(exc)[:500])
    point = result.reset_point
    kept = (
        f"keeps {point['kept_events']} events (cut before event {point['cut']}), "
        f"re-issues steps {point['reissued_steps'] or 'none'}, "
        f"re-applies {point['reapplied_signals']} signal(s)"
    )
    if dry_run:
        return Outcome(target, True, f"would_{kind}", detail=kept)
    where = f"{result.instance_id} ({result.run_id})"
    return Outcome(
        target, True, "reset" if kind == "reset" else "forked", detail=f"{where}: {kept}"
    )
