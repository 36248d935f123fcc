"""Instances, runs and their append-only history."""

from __future__ import annotations

from django.db import models

from durable_workflow.ids import uuid7
from durable_workflow.models.choices import TERMINAL_RUN_STATUSES, InstanceStatus, RunStatus
from durable_workflow.models.manager import EngineManager


class WorkflowInstance(models.Model):
    """The stable public handle; spans every run of a continue-as-new chain."""

    objects = EngineManager()

    #: ``namespaces.instance_key(namespace, instance_id)``: the instance id itself in the
    #: ``default`` namespace (rows from before namespaces kept theirs).
    key = models.CharField(max_length=320, primary_key=True)
    namespace = models.CharField(max_length=128, default="default")
    instance_id = models.CharField(max_length=191)
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
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "instance_id"], name="dw_instance_namespace_id"
            )
        ]

    def __str__(self) -> str:
        return self.instance_id


class WorkflowRun(models.Model):
    """One execution generation of an instance, with its own history."""

    objects = EngineManager()

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    namespace = models.CharField(max_length=128, default="default")
    instance_id = models.CharField(max_length=191)
    #: No column: the instance a run belongs to is its (namespace, instance_id).
    instance = models.ForeignObject(
        WorkflowInstance,
        on_delete=models.DO_NOTHING,
        from_fields=["namespace", "instance_id"],
        to_fields=["namespace", "instance_id"],
        related_name="runs",
    )
    run_number = models.PositiveIntegerField(default=1)
    workflow_type = models.CharField(max_length=255)
    workflow_class = models.CharField(max_length=255, blank=True, default="")
    workflow_definition_fingerprint = models.CharField(max_length=80, blank=True, default="")
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
    #: Last history sequence a workflow task has seen; queries replay up to here.
    workflow_task_sequence = models.PositiveIntegerField(default=0)
    history_size_bytes = models.PositiveBigIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    #: The lineage keys below are mostly empty: indexed only where set (Meta).
    parent_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="child_runs",
        db_index=False,
    )
    parent_sequence = models.PositiveIntegerField(null=True, blank=True)
    parent_close_policy = models.CharField(max_length=32, null=True, blank=True)
    continued_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="continued_as",
        db_index=False,
    )
    #: Rewind lineage: the run this one was reset (or forked) from, the run a reset
    #: of this one started, and the point (``engine.rewind.Plan.describe``).
    reset_from_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    reset_to_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    reset_point = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    #: Set when an operator archives the closed run: it leaves the default lists.
    archived_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    #: Compatibility marker of the build that started the run (rolling deploys).
    compatibility = models.CharField(max_length=191, null=True, blank=True)
    #: Sticky affinity: the worker holding this run warm, and until when.
    sticky_worker_id = models.CharField(max_length=191, null=True, blank=True)
    sticky_until = models.DateTimeField(null=True, blank=True)
    #: ``StartOptions.deduplication_id``: at most one open run holds a given id.
    deduplication_id = models.CharField(max_length=191, null=True, blank=True)
    #: On a queue that limits its runs (``workflow_concurrency``): ``waiting`` for a slot
    #: (not started), or ``held`` (let start; the slot is the run's until it closes).
    queue_slot = models.CharField(max_length=8, null=True, blank=True)
    #: ``StartOptions.priority``: orders the runs waiting on a queue (0 first, 9 last).
    priority = models.PositiveSmallIntegerField(default=5)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "durable_workflow_run"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "instance_id", "run_number"],
                name="durable_workflow_run_number_unique",
            ),
            # The database, not a read-then-write, decides between two concurrent starts
            # with one de-duplication id; closing a run frees its id.
            models.UniqueConstraint(
                fields=["namespace", "deduplication_id"],
                condition=models.Q(deduplication_id__isnull=False)
                & ~models.Q(status__in=sorted(TERMINAL_RUN_STATUSES)),
                name="dw_run_deduplication_open",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "workflow_type"], name="dw_run_status_type"),
            models.Index(fields=["created_at"], name="dw_run_created"),
            # A run update that is not HOT (its status changed) adds an entry to every
            # index: the mostly empty columns are indexed only where set.
            models.Index(
                fields=["business_key"],
                name="dw_run_business_key",
                condition=models.Q(business_key__isnull=False),
            ),
            models.Index(
                fields=["parent_run"],
                name="dw_run_parent",
                condition=models.Q(parent_run__isnull=False),
            ),
            models.Index(
                fields=["continued_from"],
                name="dw_run_continued_from",
                condition=models.Q(continued_from__isnull=False),
            ),
            models.Index(
                fields=["reset_from_run"],
                name="dw_run_reset_from",
                condition=models.Q(reset_from_run__isnull=False),
            ),
            models.Index(
                fields=["reset_to_run"],
                name="dw_run_reset_to",
                condition=models.Q(reset_to_run__isnull=False),
            ),
            models.Index(fields=["workflow_type", "started_at"], name="dw_run_type_started"),
            models.Index(fields=["archived_at"], name="dw_run_archived"),
            models.Index(fields=["queue", "queue_slot"], name="dw_run_queue_slot"),
            # Open runs only: what the doctor and the repair pass look through, a few
            # among a year of closed ones (measured: benchmarks scenario ``aged``).
            models.Index(
                fields=["created_at"],
                condition=~models.Q(status__in=sorted(TERMINAL_RUN_STATUSES)),
                name="dw_run_open",
            ),
            # Open runs with a deadline: the repair pass's deadline watch reads only these.
            *(
                models.Index(
                    fields=[field],
                    condition=models.Q(**{f"{field}__isnull": False})
                    & ~models.Q(status__in=sorted(TERMINAL_RUN_STATUSES)),
                    name=name,
                )
                for field, name in (
                    ("execution_deadline_at", "dw_run_open_execution_deadline"),
                    ("run_deadline_at", "dw_run_open_run_deadline"),
                )
            ),
            # ``list_runs`` pages newest first: walking this index stops after a page
            # even when a filter keeps a large share of the runs.
            models.Index(fields=["started_at", "id"], name="dw_run_started"),
            # Closed runs, oldest closed first: ``workflow_prune`` takes each batch from
            # here (without it, a seq scan of every run per batch).
            models.Index(
                fields=["closed_at", "id"],
                condition=models.Q(closed_at__isnull=False),
                name="dw_run_closed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id} #{self.run_number}"

    @property
    def history_event_count(self) -> int:
        return self.next_sequence - 1


class HistoryEvent(models.Model):
    """Append-only: rows are inserted once and never updated."""

    objects = EngineManager()

    id = models.BigAutoField(primary_key=True)
    #: No index of its own: the (run, sequence) constraint's index leads with it.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="history", db_index=False
    )
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
        #: A run's events of one type, in order (the timeline filtered by type).
        indexes = [
            models.Index(fields=["run", "event_type", "sequence"], name="dw_history_run_type")
        ]

    def __str__(self) -> str:
        return f"{self.sequence} {self.event_type}"
