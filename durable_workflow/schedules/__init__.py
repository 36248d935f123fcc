"""Schedules: start workflow runs on cron expressions and fixed intervals.

Usage::

    from durable_workflow.schedules import ScheduleManager, ScheduleOverlapPolicy

    ScheduleManager.create(
        schedule_id="nightly-sync", workflow="billing.sync", cron_expression="0 2 * * *"
    )

``manage.py schedule_tick`` (or the Celery beat entry ``schedule_beat_entry()``)
fires what is due.

The names below are imported on first use, so ``durable_workflow.schedules.tasks``
(``schedule_beat_entry()``) can be imported from ``proj/celery.py`` before Django has
loaded its apps: the manager and the policies need the models, the beat entry does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from durable_workflow.schedules.records import (
        ScheduleDescription,
        ScheduleEvent,
        SchedulePage,
    )

#: Where each public name lives (a submodule of this package).
_HOMES = {
    "CommandContext": "audit",
    "ScheduleEventType": "audit",
    "InvalidCronExpressionError": "errors",
    "InvalidScheduleError": "errors",
    "InvalidTimezoneError": "errors",
    "ScheduleAlreadyExistsError": "errors",
    "ScheduleDeletedError": "errors",
    "ScheduleError": "errors",
    "ScheduleNotFoundError": "errors",
    "UnknownScheduleWorkflowError": "errors",
    "ScheduleManager": "manager",
    "Outcome": "policies",
    "ScheduleOverlapPolicy": "policies",
    "ScheduleStatus": "policies",
    "SkipReason": "policies",
    "ScheduleDescription": "records",
    "ScheduleEvent": "records",
    "SchedulePage": "records",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


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
    "SchedulePage",
    "ScheduleStatus",
    "SkipReason",
    "UnknownScheduleWorkflowError",
]
