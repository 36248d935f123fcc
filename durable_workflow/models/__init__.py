"""Schema only. Every read and write goes through ``durable_workflow.store``."""

from durable_workflow.models.bulk import BulkItemState, BulkJob, BulkJobItem, BulkJobStatus
from durable_workflow.models.choices import (
    TERMINAL_RUN_STATUSES,
    ActivityStatus,
    AttemptStatus,
    ChildCallStatus,
    CommandStatus,
    CommandType,
    FailureCategory,
    InstanceStatus,
    ParentClosePolicy,
    RunStatus,
    SignalStatus,
    TaskStatus,
    TaskType,
    TimerStatus,
    UpdateStatus,
)
from durable_workflow.models.commands import WorkflowCommand, WorkflowFailure
from durable_workflow.models.messaging import WorkflowSignal, WorkflowUpdate
from durable_workflow.models.queues import WorkQueue, WorkQueueStart
from durable_workflow.models.runs import HistoryEvent, WorkflowInstance, WorkflowRun
from durable_workflow.models.schedules import (
    ScheduleFire,
    ScheduleFireKind,
    ScheduleFireStatus,
    ScheduleHistoryEvent,
    ScheduleOverlapPolicy,
    ScheduleStatus,
    WorkflowSchedule,
)
from durable_workflow.models.streams import WorkflowMessage
from durable_workflow.models.tasks import (
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    Task,
    Timer,
)
from durable_workflow.models.visibility import SearchAttribute
from durable_workflow.models.workers import WorkerRegistration, WorkerSession

__all__ = [
    "TERMINAL_RUN_STATUSES",
    "ActivityAttempt",
    "ActivityExecution",
    "ActivityStatus",
    "AttemptStatus",
    "BulkItemState",
    "BulkJob",
    "BulkJobItem",
    "BulkJobStatus",
    "ChildCall",
    "ChildCallStatus",
    "CommandStatus",
    "CommandType",
    "FailureCategory",
    "HistoryEvent",
    "InstanceStatus",
    "ParentClosePolicy",
    "RunStatus",
    "ScheduleFire",
    "ScheduleFireKind",
    "ScheduleFireStatus",
    "ScheduleHistoryEvent",
    "ScheduleOverlapPolicy",
    "ScheduleStatus",
    "SearchAttribute",
    "SignalStatus",
    "Task",
    "TaskStatus",
    "TaskType",
    "Timer",
    "TimerStatus",
    "UpdateStatus",
    "WorkQueue",
    "WorkQueueStart",
    "WorkerRegistration",
    "WorkerSession",
    "WorkflowCommand",
    "WorkflowFailure",
    "WorkflowInstance",
    "WorkflowMessage",
    "WorkflowRun",
    "WorkflowSchedule",
    "WorkflowSignal",
    "WorkflowUpdate",
]
