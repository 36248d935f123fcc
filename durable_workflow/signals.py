"""Lifecycle signals, sent only after the transaction that recorded the fact commits.

Connect receivers as with any Django signal::

    from django.dispatch import receiver
    from durable_workflow.signals import workflow_completed

    @receiver(workflow_completed)
    def on_completed(sender, event, **kwargs):
        log.info("run %s of %s completed", event.run_id, event.instance_id)

``event`` is a ``LifecycleEvent``; ``sender`` is the durable type key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from django.dispatch import Signal

workflow_started = Signal()
workflow_completed = Signal()
workflow_failed = Signal()
workflow_cancelled = Signal()
workflow_terminated = Signal()
activity_started = Signal()
activity_completed = Signal()
activity_failed = Signal()
#: A workflow task failed and parked its run (no history event: the run is untouched).
workflow_task_failed = Signal()

#: A failure row committed (any source: run, activity, update, parked workflow task).
#: The one hook for error reporting; ``event`` is a ``FailureRecordedEvent``.
failure_recorded = Signal()

#: ``LifecycleEvent.event_type`` of ``workflow_task_failed``.
WORKFLOW_TASK_FAILED = "WorkflowTaskFailed"


@dataclasses.dataclass(frozen=True)
class LifecycleEvent:
    """Durable identity of what happened; activity fields are set for activity events."""

    event_type: str
    instance_id: str
    run_id: str
    workflow_type: str
    workflow_class: str
    committed_at: dt.datetime
    sequence: int | None = None
    activity_execution_id: str | None = None
    activity_type: str | None = None
    activity_class: str | None = None
    attempt_number: int | None = None
    exception_class: str | None = None
    message: str | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class FailureRecordedEvent:
    """A committed failure row: its id and source, and the run it belongs to.

    ``source_kind`` is ``workflow_run``, ``activity_execution``, ``workflow_update``
    or ``workflow_task``; ``source_id`` is the run, execution, update or task id.
    """

    failure_id: str
    source_kind: str
    source_id: str
    failure_category: str
    exception_type: str
    exception_class: str
    message: str
    instance_id: str
    run_id: str
    workflow_type: str
    workflow_class: str
    committed_at: dt.datetime


#: History event type -> the signal announcing it.
SIGNAL_OF_EVENT = {
    "WorkflowStarted": workflow_started,
    "WorkflowCompleted": workflow_completed,
    "WorkflowFailed": workflow_failed,
    "WorkflowTimedOut": workflow_failed,
    "WorkflowCancelled": workflow_cancelled,
    "WorkflowTerminated": workflow_terminated,
    "ActivityStarted": activity_started,
    "ActivityCompleted": activity_completed,
    "ActivityFailed": activity_failed,
}

#: Facts that are not history events -> the signal announcing them.
SIGNAL_OF_FACT = {WORKFLOW_TASK_FAILED: workflow_task_failed}
