"""Schedules, the fire slots they claim, and their audit stream."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.manager import EngineManager


class ScheduleStatus(models.TextChoices):
    ACTIVE = "active"
    PAUSED = "paused"
    DELETED = "deleted"


class ScheduleOverlapPolicy(models.TextChoices):
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    ALLOW_ALL = "allow_all"
    CANCEL_OTHER = "cancel_other"
    TERMINATE_OTHER = "terminate_other"


class ScheduleFireKind(models.TextChoices):
    TICK = "tick"
    MANUAL = "manual"
    BACKFILL = "backfill"


class ScheduleFireStatus(models.TextChoices):
    BUFFERED = "buffered"
    STARTED = "started"
    SKIPPED = "skipped"


class WorkflowSchedule(models.Model):
    """A named, durable recipe for starting runs of one workflow type over time."""

    objects = EngineManager()

    #: The internal id (the spec's ``schedule_ulid``): a time-ordered UUID.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    namespace = models.CharField(max_length=64, default="default")
    schedule_id = models.CharField(max_length=128)
    status = models.CharField(
        max_length=16, choices=ScheduleStatus.choices, default=ScheduleStatus.ACTIVE
    )
    spec = models.JSONField(default=dict)
    workflow_type = models.CharField(max_length=255)
    workflow_class = models.CharField(max_length=255, blank=True, default="")
    #: The workflow's positional arguments, as a codec envelope.
    arguments = models.JSONField(default=dict)
    overlap_policy = models.CharField(
        max_length=32, choices=ScheduleOverlapPolicy.choices, default=ScheduleOverlapPolicy.SKIP
    )
    jitter_seconds = models.PositiveIntegerField(default=0)
    max_runs = models.PositiveIntegerField(null=True, blank=True)
    remaining_actions = models.PositiveIntegerField(null=True, blank=True)
    connection = models.CharField(max_length=255, null=True, blank=True)
    queue = models.CharField(max_length=255, null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    memo = models.JSONField(default=dict, blank=True)
    search_attributes = models.JSONField(default=dict, blank=True)
    notes = models.TextField(null=True, blank=True)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    fires_count = models.PositiveIntegerField(default=0)
    latest_instance_id = models.CharField(max_length=191, null=True, blank=True)
    last_skip_reason = models.CharField(max_length=64, null=True, blank=True)
    last_skipped_at = models.DateTimeField(null=True, blank=True)
    skipped_trigger_count = models.PositiveIntegerField(default=0)
    #: Fire slots waiting for the previous run to close (buffer policies).
    buffered_count = models.PositiveIntegerField(default=0)
    #: Sequence of the newest audit event; the next one gets this plus one.
    last_event_sequence = models.PositiveIntegerField(default=0)
    paused_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_schedule"
        ordering = ["namespace", "schedule_id"]
        constraints = [
            # Deleted rows stay for the record; the id may then be used again.
            models.UniqueConstraint(
                fields=["namespace", "schedule_id"],
                condition=~models.Q(status="deleted"),
                name="durable_workflow_schedule_id_unique",
            )
        ]
        indexes = [
            models.Index(fields=["status", "next_fire_at"], name="dw_schedule_due"),
            models.Index(fields=["status", "buffered_count"], name="dw_schedule_buffered"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.schedule_id}"


class ScheduleFire(models.Model):
    """One fire slot of a schedule, claimed exactly once.

    The slot is named by the deterministic workflow instance id it would start,
    so two tickers racing the same occurrence collide on the unique constraint.
    """

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    schedule = models.ForeignKey(WorkflowSchedule, on_delete=models.CASCADE, related_name="fires")
    instance_id = models.CharField(max_length=191)
    kind = models.CharField(max_length=16, choices=ScheduleFireKind.choices)
    status = models.CharField(max_length=16, choices=ScheduleFireStatus.choices)
    occurrence_time = models.DateTimeField()
    run_id = models.UUIDField(null=True, blank=True)
    skip_reason = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_schedule_fire"
        ordering = ["schedule", "occurrence_time"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "instance_id"], name="durable_workflow_schedule_fire_slot"
            )
        ]
        indexes = [
            models.Index(fields=["schedule", "status", "occurrence_time"], name="dw_fire_status"),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id} ({self.status})"


class ScheduleHistoryEvent(models.Model):
    """Append-only audit stream of one schedule.

    It names its schedule by value, not by foreign key, so the stream outlives
    the schedule row if an operator ever removes that for good.
    """

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    schedule_ulid = models.UUIDField()
    namespace = models.CharField(max_length=64)
    schedule_id = models.CharField(max_length=128)
    sequence = models.PositiveIntegerField()
    event_type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    workflow_instance_id = models.CharField(max_length=191, null=True, blank=True)
    workflow_run_id = models.UUIDField(null=True, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_schedule_history_event"
        ordering = ["schedule_ulid", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule_ulid", "sequence"],
                name="durable_workflow_schedule_event_sequence",
            )
        ]
        indexes = [
            models.Index(fields=["namespace", "schedule_id"], name="dw_schedule_event_lookup"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} {self.sequence} {self.event_type}"
