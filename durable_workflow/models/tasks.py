"""Claimable tasks, activity executions and attempts, durable timers."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.choices import (
    ActivityStatus,
    AttemptStatus,
    ChildCallStatus,
    ParentClosePolicy,
    TaskStatus,
    TaskType,
    TimerStatus,
)
from durable_workflow.models.manager import EngineManager
from durable_workflow.models.runs import WorkflowRun


class Task(models.Model):
    """A unit of work a worker can claim: replay a run, run an activity, fire a timer."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    #: Indexes that lead with run, activity_execution or timer are in Meta (every
    #: index is one more entry per task row written: see docs/performance.md).
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="tasks", db_index=False
    )
    #: The run's namespace, copied so a worker or operator can select by it.
    namespace = models.CharField(max_length=128, default="default")
    task_type = models.CharField(max_length=16, choices=TaskType.choices)
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.READY)
    available_at = models.DateTimeField()
    queue = models.CharField(max_length=255, null=True, blank=True)
    connection = models.CharField(max_length=255, null=True, blank=True)
    activity_execution = models.ForeignKey(
        "ActivityExecution",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tasks",
        db_index=False,
    )
    timer = models.ForeignKey(
        "Timer",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tasks",
        db_index=False,
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
    #: Only a worker supporting this marker may claim the task (``None``: any).
    compatibility = models.CharField(max_length=191, null=True, blank=True)
    #: Sticky affinity inherited from the run when the task was created.
    sticky_worker_id = models.CharField(max_length=191, null=True, blank=True)
    sticky_until = models.DateTimeField(null=True, blank=True)
    #: How the claim replayed: sticky_hit_expected, cold_replay or forced_cold_replay.
    sticky_replay_mode = models.CharField(max_length=32, null=True, blank=True)
    sticky_claimed_at = models.DateTimeField(null=True, blank=True)
    #: A ready task of a limited queue whose claim was refused: ``capacity``, ``rate`` or
    #: ``worker`` (it waits, with no message in flight, until the engine sends it when a
    #: slot frees or the rate window opens); ``woken`` once sent for a slot.
    queue_wait = models.CharField(max_length=16, null=True, blank=True)
    #: Order among the waiting tasks of a limited queue: 0 first, 9 last, then FIFO.
    priority = models.PositiveSmallIntegerField(default=5)
    #: The worker node (Celery node name) holding the lease, for per-worker limits.
    lease_node = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_task"
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["queue", "status"], name="dw_task_queue_status"),
            models.Index(fields=["status", "available_at"], name="dw_task_status_available"),
            models.Index(fields=["run", "task_type", "status"], name="dw_task_run_type_status"),
            models.Index(fields=["status", "lease_expires_at"], name="dw_task_status_lease"),
            # Most tasks have no timer, workflow tasks no activity: index only the rows
            # that have one (an equality lookup implies NOT NULL, so these serve it).
            models.Index(
                fields=["timer"], name="dw_task_timer", condition=models.Q(timer__isnull=False)
            ),
            models.Index(
                fields=["activity_execution"],
                name="dw_task_activity",
                condition=models.Q(activity_execution__isnull=False),
            ),
            # Failed workflow tasks (parked runs, past incidents): the doctor's and the
            # admin's "stopped on a failed workflow task" starts here, not from the runs.
            models.Index(
                fields=["run"],
                name="dw_task_failed_workflow",
                condition=models.Q(status="failed", task_type="workflow"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_type} task {self.id}"


class ActivityExecution(models.Model):
    """One activity call of a workflow body; its id is the idempotency key."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="activity_executions", db_index=False
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
    last_heartbeat_progress = models.JSONField(null=True, blank=True)
    #: Deadlines from the options snapshot; the repair pass enforces them.
    schedule_to_close_deadline_at = models.DateTimeField(null=True, blank=True)
    schedule_to_start_deadline_at = models.DateTimeField(null=True, blank=True)
    #: The worker session this activity runs in (``options["worker_session"]``).
    worker_session_id = models.CharField(max_length=255, null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_activity_execution"
        ordering = ["run", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sequence"], name="durable_workflow_activity_sequence_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["worker_session_id"],
                name="dw_activity_session",
                condition=models.Q(worker_session_id__isnull=False),
            ),
            # Open executions only (pending or running): the repair pass's timeout scans
            # and the doctor read these, a handful among millions of closed ones.
            models.Index(
                fields=["status"],
                condition=models.Q(status__in=["pending", "running"]),
                name="dw_activity_open",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.activity_type} #{self.sequence}"


class ActivityAttempt(models.Model):
    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    execution = models.ForeignKey(
        ActivityExecution, on_delete=models.CASCADE, related_name="attempts", db_index=False
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
    start_to_close_deadline_at = models.DateTimeField(null=True, blank=True)
    heartbeat_deadline_at = models.DateTimeField(null=True, blank=True)

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
    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="timers")
    sequence = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=TimerStatus.choices, default=TimerStatus.PENDING
    )
    #: Seconds, to the millisecond (``dw.timer(0.1)``).
    delay_seconds = models.FloatField()
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


class ChildCall(models.Model):
    """One ``dw.child(...)`` call of a parent run, and where its child stands."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    parent_run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="child_calls"
    )
    sequence = models.PositiveIntegerField()
    child_instance_id = models.CharField(max_length=191, db_index=True)
    child_workflow_type = models.CharField(max_length=255)
    child_run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=ChildCallStatus.choices)
    parent_close_policy = models.CharField(
        max_length=32, choices=ParentClosePolicy.choices, default=ParentClosePolicy.ABANDON
    )
    #: The child's outcome as the parent will see it (result envelope or failure fields).
    outcome = models.JSONField(null=True, blank=True)
    #: Child run last reported to the parent (ChildRunStarted), and whether the
    #: outcome is already in the parent's history.
    reported_run_id = models.UUIDField(null=True, blank=True)
    outcome_recorded = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_child_call"
        ordering = ["parent_run", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["parent_run", "sequence"], name="durable_workflow_child_sequence_unique"
            )
        ]

    def __str__(self) -> str:
        return f"child {self.child_instance_id} ({self.status})"
