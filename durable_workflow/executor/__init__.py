"""The only place where the store and the engine meet, one transaction at a time."""

from durable_workflow.executor.activity_task import run_activity_task
from durable_workflow.executor.repair import RepairReport, repair_pass
from durable_workflow.executor.start import StartOutcome, start_workflow
from durable_workflow.executor.timer_task import run_timer_task
from durable_workflow.executor.workflow_task import run_workflow_task

__all__ = [
    "RepairReport",
    "StartOutcome",
    "repair_pass",
    "run_activity_task",
    "run_timer_task",
    "run_workflow_task",
    "start_workflow",
]
