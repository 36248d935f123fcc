"""The other engine tables: history, tasks, activities, timers, commands, failures, messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.utils.html import format_html
from django.utils.text import Truncator

from durable_workflow.admin.base import EngineAdmin, IdSearchMixin, link, timeline_url
from durable_workflow.admin.filters import (
    ActivityTypeFilter,
    EventTypeFilter,
    QueueFilter,
)
from durable_workflow.admin.payloads import pre
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    HistoryEvent,
    SearchAttribute,
    Task,
    Timer,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowInstance,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)
from durable_workflow.namespaces import instance_key
from durable_workflow.store import activities

if TYPE_CHECKING:  # generic to the type checker only
    _AttemptInline = admin.TabularInline[ActivityAttempt, ActivityExecution]
else:
    _AttemptInline = admin.TabularInline


class RunColumnMixin:
    """A ``run`` column linking to the run and its timeline, without a join."""

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj: Any) -> str:
        if obj.run_id is None:
            return "-"
        return format_html(
            '{} (<a href="{}">timeline</a>)',
            link(WorkflowRun, obj.run_id),
            timeline_url(obj.run_id),
        )


@admin.register(HistoryEvent)
class HistoryEventAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = ("run_link", "sequence", "event_type", "recorded_at")
    list_filter = (EventTypeFilter, ("recorded_at", admin.DateFieldListFilter))
    search_fields = ("=event_type",)
    search_help_text = "Run id, instance id or exact event type."
    readonly_fields = ("run_link", "payload_display")
    fields = ("run_link", "sequence", "event_type", "recorded_at", "payload_display")

    @admin.display(description="payload (decoded)")
    def payload_display(self, event: HistoryEvent) -> str:
        return pre(event.payload)


@admin.register(Task)
class TaskAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = (
        "id",
        "run_link",
        "task_type",
        "status",
        "queue",
        "available_at",
        "attempt_count",
        "lease_owner",
        "lease_expires_at",
        "dispatch_count",
    )
    list_filter = (
        "task_type",
        "status",
        QueueFilter,
        ("available_at", admin.DateFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=lease_owner",)
    search_help_text = "Run id, instance id or lease owner."
    readonly_fields = ("run_link", "payload_display")

    def get_search_results(self, request: Any, queryset: Any, search_term: str) -> Any:
        results, duplicates = super().get_search_results(request, queryset, search_term)
        from durable_workflow.admin.base import id_search

        extra = id_search(search_term.strip(), run_field="pk")
        return (results | queryset.filter(extra) if extra else results), duplicates

    @admin.display(description="payload")
    def payload_display(self, task: Task) -> str:
        return pre(task.payload)


class ActivityAttemptInline(_AttemptInline):
    model = ActivityAttempt
    extra = 0
    can_delete = False
    show_change_link = True
    fields = (
        "attempt_number",
        "status",
        "lease_owner",
        "started_at",
        "last_heartbeat_at",
        "closed_at",
        "retry_reason",
    )
    readonly_fields = fields

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ActivityExecution)
class ActivityExecutionAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = (
        "id",
        "run_link",
        "sequence",
        "activity_type",
        "status",
        "attempt_count",
        "queue",
        "scheduled_at",
        "closed_at",
    )
    list_filter = (
        "status",
        ActivityTypeFilter,
        QueueFilter,
        ("scheduled_at", admin.DateFieldListFilter),
    )
    search_fields = ("=activity_type",)
    search_help_text = "Run id, instance id or exact activity type."
    inlines = (ActivityAttemptInline,)
    readonly_fields = ("run_link", "arguments_display", "result_display")
    exclude = ("arguments", "result")

    @admin.display(description="arguments (decoded)")
    def arguments_display(self, execution: ActivityExecution) -> str:
        return pre(execution.arguments)

    @admin.display(description="result (decoded)")
    def result_display(self, execution: ActivityExecution) -> str:
        result = activities.execution_results([execution]).get(execution.id)
        return pre(result) if result is not None else "-"


@admin.register(ActivityAttempt)
class ActivityAttemptAdmin(EngineAdmin):
    list_display = (
        "id",
        "execution_link",
        "attempt_number",
        "status",
        "lease_owner",
        "started_at",
        "closed_at",
    )
    list_filter = ("status", ("started_at", admin.DateFieldListFilter))
    search_fields = ("=lease_owner",)
    search_help_text = "Lease owner."
    list_select_related = ("execution",)

    @admin.display(description="activity execution")
    def execution_link(self, attempt: ActivityAttempt) -> str:
        execution = attempt.execution
        return link(
            ActivityExecution, execution.pk, f"{execution.activity_type} #{execution.sequence}"
        )


@admin.register(Timer)
class TimerAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = (
        "id",
        "run_link",
        "sequence",
        "status",
        "delay_seconds",
        "fire_at",
        "fired_at",
        "timer_kind",
    )
    list_filter = ("status", "timer_kind", ("fire_at", admin.DateFieldListFilter))
    search_help_text = "Run id or instance id."


@admin.register(ChildCall)
class ChildCallAdmin(IdSearchMixin, EngineAdmin):
    run_field = "parent_run_id"
    instance_field = "child_instance_id"
    list_display = (
        "parent_link",
        "sequence",
        "child_instance_id",
        "child_workflow_type",
        "child_link",
        "status",
        "parent_close_policy",
        "created_at",
    )
    list_filter = ("status", "parent_close_policy", ("created_at", admin.DateFieldListFilter))
    search_help_text = "Parent run id or child instance id."

    @admin.display(description="parent run")
    def parent_link(self, call: ChildCall) -> str:
        return link(WorkflowRun, call.parent_run_id)

    @admin.display(description="child run")
    def child_link(self, call: ChildCall) -> str:
        return link(WorkflowRun, call.child_run_id)


@admin.register(WorkflowCommand)
class WorkflowCommandAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    instance_field = "instance_id"
    list_display = (
        "created_at",
        "instance_link",
        "command_type",
        "status",
        "outcome",
        "rejection_reason",
        "source",
        "short_reason",
    )
    list_filter = (
        "command_type",
        "status",
        "source",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=outcome",)
    search_help_text = "Instance id, run id or exact outcome."
    readonly_fields = ("instance_link", "run_link")

    @admin.display(description="instance", ordering="instance_id")
    def instance_link(self, command: WorkflowCommand) -> str:
        key = instance_key(command.namespace, command.instance_id)
        return link(WorkflowInstance, key, command.instance_id)

    @admin.display(description="reason")
    def short_reason(self, command: WorkflowCommand) -> str:
        return Truncator(command.reason).chars(60)


@admin.register(WorkflowFailure)
class WorkflowFailureAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = (
        "created_at",
        "run_link",
        "failure_category",
        "exception_type",
        "non_retryable",
        "source_kind",
        "short_message",
    )
    list_filter = (
        "failure_category",
        "non_retryable",
        "source_kind",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=exception_type", "=exception_class")
    search_help_text = "Run id, instance id or exact exception type."
    readonly_fields = ("run_link", "traceback_display")
    exclude = ("traceback",)

    @admin.display(description="message")
    def short_message(self, failure: WorkflowFailure) -> str:
        return Truncator(failure.message).chars(80)

    @admin.display(description="traceback")
    def traceback_display(self, failure: WorkflowFailure) -> str:
        return format_html('<pre class="dw-traceback">{}</pre>', failure.traceback or "-")


@admin.register(WorkflowSignal)
class WorkflowSignalAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    instance_field = "instance_id"
    list_display = (
        "received_at",
        "instance_id",
        "signal_name",
        "status",
        "rejection_reason",
        "applied_at",
    )
    list_filter = ("status", ("received_at", admin.DateFieldListFilter))
    search_fields = ("=signal_name",)
    search_help_text = "Instance id, run id or exact signal name."
    readonly_fields = ("run_link", "arguments_display")
    exclude = ("arguments",)

    @admin.display(description="arguments (decoded)")
    def arguments_display(self, signal: WorkflowSignal) -> str:
        return pre(signal.arguments)


@admin.register(WorkflowUpdate)
class WorkflowUpdateAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    instance_field = "instance_id"
    list_display = (
        "accepted_at",
        "instance_id",
        "update_name",
        "status",
        "rejection_reason",
        "closed_at",
    )
    list_filter = ("status", ("accepted_at", admin.DateFieldListFilter))
    search_fields = ("=update_name",)
    search_help_text = "Instance id, run id or exact update name."
    readonly_fields = ("run_link", "arguments_display", "result_display")
    exclude = ("arguments", "result")

    @admin.display(description="arguments (decoded)")
    def arguments_display(self, update: WorkflowUpdate) -> str:
        return pre(update.arguments)

    @admin.display(description="result (decoded)")
    def result_display(self, update: WorkflowUpdate) -> str:
        return pre(update.result) if update.result is not None else "-"


@admin.register(SearchAttribute)
class SearchAttributeAdmin(IdSearchMixin, RunColumnMixin, EngineAdmin):
    list_display = ("run_link", "key", "value_string", "value_number", "value_bool")
    search_fields = ("=key", "=value_string")
    search_help_text = "Run id, instance id, exact key or exact string value."
    readonly_fields = ("run_link",)
