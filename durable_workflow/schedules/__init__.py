"""Schedules: start workflow runs on cron expressions and fixed intervals.

Usage::

    from durable_workflow.schedules import ScheduleManager, ScheduleOverlapPolicy

    ScheduleManager.create(
        schedule_id="nightly-sync", workflow="billing.sync", cron_expression="0 2 * * *"
    )

``manage.py schedule_tick`` (or the Celery beat entry ``schedule_beat_entry()``)
fires what is due.
"""

from durable_workflow.schedules.audit import CommandContext, ScheduleEventType
from durable_workflow.schedules.errors import (
    InvalidCronExpressionError,
    InvalidScheduleError,
    InvalidTimezoneError,
    ScheduleAlreadyExistsError,
    ScheduleDeletedError,
    ScheduleError,
    ScheduleNotFoundError,
    UnknownScheduleWorkflowError,
)
from durable_workflow.schedules.manager import ScheduleManager
from durable_workflow.schedules.policies import (
    Outcome,
    ScheduleOverlapPolicy,
    ScheduleStatus,
    SkipReason,
)
from durable_workflow.schedules.records import ScheduleDescription, ScheduleEvent

__all__ = [
    "CommandContext",
    "InvalidCronExpressionError",
    "InvalidScheduleError",
    "InvalidTimezoneError",
    "Outcome",
    "ScheduleAlreadyExistsError",
    "ScheduleDeletedError",
    "ScheduleDescription",
    "ScheduleError",
    "ScheduleEvent",
    "ScheduleEventType",
    "ScheduleManager",
    "ScheduleNotFoundError",
    "ScheduleOverlapPolicy",
    "ScheduleStatus",
    "SkipReason",
    "UnknownScheduleWorkflowError",
]
