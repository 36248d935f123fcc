"""Schema only. Every read and write goes through ``durable_workflow.store``."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7


class InstanceStatus(models.TextChoices):
    RESERVED = "reserved"
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"


class RunStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"


TERMINAL_RUN_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TERMINATED}
)


class TaskType(models.TextChoices):
    WORKFLOW = "workflow"
    ACTIVITY = "activity"
    TIMER = "timer"


class TaskStatus(models.TextChoices):
    READY = "ready"
    LEASED = "leased"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"


class ActivityStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"


class AttemptStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class TimerStatus(models.TextChoices):
    PENDING = "pending"
    CANCELLED = "cancelled"
    FIRED = "fired"


class CommandType(models.TextChoices):
    START = "start"
    SIGNAL = "signal"
    UPDATE = "update"
    REPAIR = "repair"
    CANCEL = "cancel"
    TERMINATE = "terminate"
    ARCHIVE = "archive"


class CommandStatus(models.TextChoices):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class FailureCategory(models.TextChoices):
    APPLICATION = "application"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    TIMEOUT = "timeout"
    ACTIVITY = "activity"
    CHILD_WORKFLOW = "child_workflow"
    TASK_FAILURE = "task_failure"
    INTERNAL = "internal"
    STRUCTURAL_LIMIT = "structural_limit"


class WorkflowInstance(models.Model):
    """The stable public handle; spans every run of a continue-as-new chain."""

    instance_id = models.CharField(max_length=191, primary_key=True)
    workflow_type = models.CharField(max_length=255, db_index=True)
    status = models.CharField(
        max_length=16, choices=InstanceStatus.choices, default=InstanceStatus.RESERVED
    )
    current_run = models.ForeignKey(
        "WorkflowRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    business_key = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    run_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_instance"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.instance_id


class WorkflowRun(models.Model):
    """One execution generation of an instance, with its own history."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="runs")
    run_number = models.PositiveIntegerField(default=1)
    workflow_type = models.CharField(max_length=255)
    workflow_class = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    closed_reason = models.CharField(max_length=32, null=True, blank=True)
    payload_codec = models.CharField(max_length=16, default="avro")
    arguments = models.JSONField(default=dict)
    output = models.JSONField(null=True, blank=True)
    queue = models.CharField(max_length=255, null=True, blank=True)
    connection = models.CharField(max_length=255, null=True, blank=True)
    business_key = models.CharField(max_length=255, null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    memo = models.JSONField(default=dict, blank=True)
    search_attributes = models.JSONField(default=dict, blank=True)
    execution_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    run_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    execution_deadline_at = models.DateTimeField(null=True, blank=True)
    run_deadline_at = models.DateTimeField(null=True, blank=True)
    next_sequence = models.PositiveIntegerField(default=1)
    history_size_bytes = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_run"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "run_number"], name="durable_workflow_run_number_unique"
            )
        ]
        indexes = [
            models.Index(fields=["status", "workflow_type"], name="dw_run_status_type"),
            models.Index(fields=["created_at"], name="dw_run_created"),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id} #{self.run_number}"

    @property
    def history_event_count(self) -> int:
        return self.next_sequence - 1


class HistoryEvent(models.Model):
    """Append-only: rows are inserted once and never updated."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="history")
    sequence = models.PositiveIntegerField()
    event_type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    recorded_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_history_event"
        ordering = ["run", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sequence"], name="durable_workflow_history_sequence_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.sequence} {self.event_type}"


class Task(models.Model):
    """A unit of work a worker can claim: replay a run, run an activity, fire a timer."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="tasks")
    task_type = models.CharField(max_length=16, choices=TaskType.choices)
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.READY)
    available_at = models.DateTimeField()
    queue = models.CharField(max_length=255, null=True, blank=True)
    connection = models.CharField(max_length=255, null=True, blank=True)
    activity_execution = models.ForeignKey(
        "ActivityExecution", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    timer = models.ForeignKey(
        "Timer", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    payload = models.JSONField(default=dict, blank=True)
    attempt_count = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=255, null=True, blank=True)
    lease_id = models.UUIDField(null=True, blank=True)
    lease_generation = models.PositiveIntegerField(default=0)
    leased_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    dispatch_count = models.PositiveIntegerField(default=0)
    last_dispatched_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_task"
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["status", "available_at"], name="dw_task_status_available"),
            models.Index(fields=["run", "task_type", "status"], name="dw_task_run_type_status"),
            models.Index(fields=["status", "lease_expires_at"], name="dw_task_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.task_type} task {self.id}"


class ActivityExecution(models.Model):
    """One activity call of a workflow body; its id is the idempotency key."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="activity_executions"
    )
    sequence = models.PositiveIntegerField()
    activity_type = models.CharField(max_length=255)
    activity_class = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=ActivityStatus.choices, default=ActivityStatus.PENDING
    )
    arguments = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    options = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=255, null=True, blank=True)
    connection = models.CharField(max_length=255, null=True, blank=True)
    attempt_count = models.PositiveIntegerField(default=0)
    current_attempt_id = models.UUIDField(null=True, blank=True)
    scheduled_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_activity_execution"
        ordering = ["run", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sequence"], name="durable_workflow_activity_sequence_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.activity_type} #{self.sequence}"


class ActivityAttempt(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    execution = models.ForeignKey(
        ActivityExecution, on_delete=models.CASCADE, related_name="attempts"
    )
    attempt_number = models.PositiveIntegerField()
    task_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.RUNNING
    )
    lease_owner = models.CharField(max_length=255, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    retry_reason = models.CharField(max_length=32, null=True, blank=True)
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_activity_attempt"
        ordering = ["execution", "attempt_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "attempt_number"],
                name="durable_workflow_attempt_number_unique",
            )
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt_number} of {self.execution_id}"


class Timer(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="timers")
    sequence = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=TimerStatus.choices, default=TimerStatus.PENDING
    )
    delay_seconds = models.PositiveBigIntegerField()
    fire_at = models.DateTimeField()
    fired_at = models.DateTimeField(null=True, blank=True)
    timer_kind = models.CharField(max_length=32, null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_timer"
        ordering = ["run", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sequence"], name="durable_workflow_timer_sequence_unique"
            )
        ]

    def __str__(self) -> str:
        return f"timer #{self.sequence} ({self.status})"


class WorkflowCommand(models.Model):
    """Every client or operator command, accepted or rejected, with its reason."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    instance_id = models.CharField(max_length=191, db_index=True)
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.CASCADE, related_name="commands"
    )
    command_type = models.CharField(max_length=16, choices=CommandType.choices)
    status = models.CharField(max_length=16, choices=CommandStatus.choices)
    outcome = models.CharField(max_length=64)
    rejection_reason = models.CharField(max_length=64, null=True, blank=True)
    source = models.CharField(max_length=32, default="client")
    reason = models.TextField(blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_command"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.command_type} {self.instance_id}: {self.outcome}"


class WorkflowFailure(models.Model):
    """A failure with its full diagnostics (the history keeps the summary)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="failures")
    source_kind = models.CharField(max_length=32)
    source_id = models.CharField(max_length=64, blank=True, default="")
    failure_category = models.CharField(max_length=32, choices=FailureCategory.choices)
    exception_type = models.CharField(max_length=255, blank=True, default="")
    exception_class = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField(blank=True, default="")
    traceback = models.TextField(blank=True, default="")
    non_retryable = models.BooleanField(default=False)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_failure"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.failure_category}: {self.exception_type}"
