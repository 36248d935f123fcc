"""Schedules, their fire slots and audit stream; pause, resume, trigger, delete.

Actions go through ``ScheduleManager`` with a ``CommandContext`` naming the
operator, ``source="admin"`` and the reason, so the audit stream records them.
Pause, resume, trigger and backfill need ``durable_workflow.change_workflowschedule``;
delete needs ``durable_workflow.delete_workflowschedule``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from durable_workflow.admin.base import EngineAdmin, link
from durable_workflow.admin.payloads import pre
from durable_workflow.admin.targets import ReasonForm
from durable_workflow.models import ScheduleFire, ScheduleHistoryEvent, WorkflowSchedule

CHANGE_SCHEDULE = "durable_workflow.change_workflowschedule"
DELETE_SCHEDULE = "durable_workflow.delete_workflowschedule"

if TYPE_CHECKING:
    from durable_workflow.schedules import CommandContext


@dataclasses.dataclass(frozen=True)
class ScheduleOperation:
    kind: str
    label: str
    help: str


SCHEDULE_OPERATIONS = {
    "pause": ScheduleOperation("pause", "Pause", "Stop firing until resumed."),
    "resume": ScheduleOperation("resume", "Resume", "Fire again; the next time counts from now."),
    "trigger": ScheduleOperation("trigger", "Trigger now", "Fire once now, under the policy."),
    "delete": ScheduleOperation(
        "delete", "Delete", "Soft-delete: the row and its audit stream stay."
    ),
    "backfill": ScheduleOperation(
        "backfill",
        "Backfill",
        "Start the occurrences of a past window, oldest first (buffering policies act as "
        "allow_all; occurrences fired already are reported, not started again).",
    ),
}


class BackfillForm(ReasonForm):
    start = forms.DateTimeField(label="From", help_text="The window's first instant.")
    end = forms.DateTimeField(label="To", help_text="Its last instant (capped at now).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order_fields(["start", "end", "reason"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start is not None and end is not None and start >= end:
            raise forms.ValidationError("the window must end after it starts")
        return data


def _backfill(schedule: WorkflowSchedule, data: dict[str, Any], context: CommandContext) -> str:
    from durable_workflow.schedules import ScheduleManager

    rows = ScheduleManager.backfill(
        schedule.schedule_id,
        data["start"],
        data["end"],
        namespace=schedule.namespace,
        context=context,
    )
    counts = Counter(str(row["outcome"]) for row in rows)
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    return f"backfilled {len(rows)} occurrence(s)" + (f": {summary}" if summary else "")


def _apply(
    kind: str, schedule: WorkflowSchedule, data: dict[str, Any], request: HttpRequest
) -> str:
    from durable_workflow.schedules import CommandContext, ScheduleError, ScheduleManager

    reason = data["reason"]
    context = CommandContext(principal=request.user.get_username(), source="admin", reason=reason)
    namespace = schedule.namespace
    try:
        if kind == "pause":
            ScheduleManager.pause(
                schedule.schedule_id, reason=reason, namespace=namespace, context=context
            )
        elif kind == "resume":
            ScheduleManager.resume(schedule.schedule_id, namespace=namespace, context=context)
        elif kind == "trigger":
            started = ScheduleManager.trigger(
                schedule.schedule_id, namespace=namespace, context=context
            )
            return f"started {started}" if started else "skipped or buffered"
        elif kind == "delete":
            ScheduleManager.delete(
                schedule.schedule_id, reason=reason, namespace=namespace, context=context
            )
        elif kind == "backfill":
            return _backfill(schedule, data, context)
    except ScheduleError as exc:
        return f"refused: {exc}"
    return "done"


def _schedule_action(kind: str) -> Any:
    operation = SCHEDULE_OPERATIONS[kind]
    permission = "delete_schedule" if kind == "delete" else "change_schedule"

    @admin.action(description=f"{operation.label} selected schedules", permissions=[permission])
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        schedules = list(queryset)
        form_class = BackfillForm if kind == "backfill" else ReasonForm
        form = form_class(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            for schedule in schedules:
                result = _apply(kind, schedule, form.cleaned_data, request)
                level = messages.WARNING if result.startswith("refused") else messages.SUCCESS
                modeladmin.message_user(
                    request, f"{operation.label} {schedule}: {result}", level=level
                )
                modeladmin.log_change(request, schedule, f"{operation.label}: {result}")
            return None
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": f"{operation.label}: {len(schedules)} schedules",
            "opts": modeladmin.model._meta,
            "operation": operation,
            "form": form,
            "targets": [str(s) for s in schedules],
            "more": 0,
            "selected": [s.pk for s in schedules],
            "changelist_action": f"schedule_{kind}",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "durable_workflow/admin/operate.html", context)

    action.__name__ = f"schedule_{kind}"
    return action


@admin.register(WorkflowSchedule)
class WorkflowScheduleAdmin(EngineAdmin):
    list_display = (
        "schedule_id",
        "namespace",
        "workflow_type",
        "status",
        "overlap_policy",
        "next_fire_at",
        "last_fired_at",
        "fires_count",
        "latest_instance_id",
    )
    list_filter = (
        "status",
        "overlap_policy",
        "namespace",
        ("next_fire_at", admin.DateFieldListFilter),
    )
    search_fields = ("=schedule_id", "^schedule_id", "=latest_instance_id", "=workflow_type")
    search_help_text = "Schedule id (exact or prefix), latest instance id or workflow type."
    actions = [_schedule_action(kind) for kind in SCHEDULE_OPERATIONS]
    readonly_fields = ("arguments_display", "audit_stream")
    exclude = ("arguments",)

    def has_change_schedule_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(CHANGE_SCHEDULE))

    def has_delete_schedule_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(DELETE_SCHEDULE))

    @admin.display(description="arguments (decoded)")
    def arguments_display(self, schedule: WorkflowSchedule) -> str:
        return pre(schedule.arguments)

    @admin.display(description="latest audit events")
    def audit_stream(self, schedule: WorkflowSchedule) -> str:
        events = ScheduleHistoryEvent.objects.filter(schedule_ulid=schedule.pk).order_by(
            "-sequence"
        )[:20]
        return pre(
            [
                {
                    "sequence": e.sequence,
                    "event_type": e.event_type,
                    "recorded_at": e.recorded_at.isoformat(),
                    "payload": e.payload,
                }
                for e in events
            ]
        )


@admin.register(ScheduleFire)
class ScheduleFireAdmin(EngineAdmin):
    list_display = (
        "occurrence_time",
        "schedule_link",
        "instance_id",
        "kind",
        "status",
        "skip_reason",
        "run_id",
    )
    list_filter = ("kind", "status", ("occurrence_time", admin.DateFieldListFilter))
    search_fields = ("=instance_id",)
    search_help_text = "Workflow instance id of the fire."
    list_select_related = ("schedule",)

    @admin.display(description="schedule")
    def schedule_link(self, fire: ScheduleFire) -> str:
        return link(WorkflowSchedule, fire.schedule_id, str(fire.schedule))


@admin.register(ScheduleHistoryEvent)
class ScheduleHistoryEventAdmin(EngineAdmin):
    list_display = (
        "recorded_at",
        "schedule_id",
        "namespace",
        "sequence",
        "event_type",
        "workflow_instance_id",
    )
    list_filter = ("event_type", ("recorded_at", admin.DateFieldListFilter))
    search_fields = ("=schedule_id", "=workflow_instance_id")
    search_help_text = "Schedule id or workflow instance id."
    readonly_fields = ("payload_display",)
    exclude = ("payload",)

    @admin.display(description="payload")
    def payload_display(self, event: ScheduleHistoryEvent) -> str:
        return pre(event.payload)
