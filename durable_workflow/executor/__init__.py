"""The only place where the store and the engine meet, one transaction at a time.

The package's face is lazy: importing ``durable_workflow.executor`` (or any of its
modules) loads none of the entry modules. ``executor.run_workflow_task`` and the other
names below are looked up on first use, so a module in here can import a sibling at
module level without the package importing it back.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_workflow.executor.activity_task import run_activity_task
    from durable_workflow.executor.outcomes import (
        ActivityTaskOutcome,
        TimerTaskOutcome,
        WorkflowTaskOutcome,
    )
    from durable_workflow.executor.repair import RepairReport, repair_pass
    from durable_workflow.executor.start import StartOutcome, start_workflow
    from durable_workflow.executor.timer_task import run_timer_task
    from durable_workflow.executor.workflow_task import run_workflow_task

#: Public name -> the module that defines it.
_EXPORTS = {
    "ActivityTaskOutcome": "outcomes",
    "RepairReport": "repair",
    "StartOutcome": "start",
    "TimerTaskOutcome": "outcomes",
    "WorkflowTaskOutcome": "outcomes",
    "repair_pass": "repair",
    "run_activity_task": "activity_task",
    "run_timer_task": "timer_task",
    "run_workflow_task": "workflow_task",
    "start_workflow": "start",
}

__all__ = [
    "ActivityTaskOutcome",
    "RepairReport",
    "StartOutcome",
    "TimerTaskOutcome",
    "WorkflowTaskOutcome",
    "repair_pass",
    "run_activity_task",
    "run_timer_task",
    "run_workflow_task",
    "start_workflow",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    try:  # ``executor.sticky`` and the like: a submodule nobody has imported yet
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
