"""Status and kind values, exactly as the spec spells them."""

from __future__ import annotations

from django.db import models


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
    RESET = "reset"
    FORK = "fork"


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


class SignalStatus(models.TextChoices):
    RECEIVED = "received"
    APPLIED = "applied"
    REJECTED = "rejected"


class UpdateStatus(models.TextChoices):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    COMPLETED = "completed"
    FAILED = "failed"


class ChildCallStatus(models.TextChoices):
    SCHEDULED = "scheduled"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    ABANDONED = "abandoned"


class ParentClosePolicy(models.TextChoices):
    ABANDON = "abandon"
    REQUEST_CANCEL = "request_cancel"
    TERMINATE = "terminate"
