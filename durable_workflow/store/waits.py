"""What an open run waits on, and the failed workflow task it is parked on (reads only)."""

from __future__ import annotations

import datetime as dt
import uuid

from durable_workflow.description import (
    ActivityWait,
    ChildWait,
    ConditionWait,
    QueueSlotWait,
    SignalWait,
    TaskFailure,
    TimerWait,
    UpdateWait,
    Wait,
    WorkflowDescription,
)
from durable_workflow.engine.events import EventType
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityExecution,
    ActivityStatus,
    ChildCall,
    ChildCallStatus,
    HistoryEvent,
    Task,
    TaskStatus,
    TaskType,
    Timer,
    TimerStatus,
    UpdateStatus,
    WorkflowFailure,
    WorkflowUpdate,
)
from durable_workflow.queue_limits import REASONS
from durable_workflow.store import work_queues
from durable_workflow.store.records import RunRecord

#: Events that close a signal or condition wait, by the wait's sequence.
_CLOSES_WAIT = (
    EventType.SIGNAL_APPLIED,
    EventType.CONDITION_WAIT_SATISFIED,
    EventType.CONDITION_WAIT_TIMED_OUT,
    EventType.TIMER_FIRED,
)
_OPENS_WAIT = (EventType.SIGNAL_WAIT_OPENED, EventType.CONDITION_WAIT_OPENED)
#: The waits that belong to a step of the body (listed in step order).
StepWait = TimerWait | SignalWait | ConditionWait | ActivityWait | ChildWait


def describe(
    instance_id: str, workflow_type: str, run: RunRecord | None, *, namespace: str
) -> WorkflowDescription:
    """The description of ``run`` (``None``: the instance is only reserved)."""
    if run is None:
        return WorkflowDescription(
            instance_id=instance_id,
            workflow_type=workflow_type,
            run_id=None,
            run_number=None,
            status="reserved",
            closed_reason=None,
            namespace=namespace,
        )
    is_open = run.status not in TERMINAL_RUN_STATUSES
    return WorkflowDescription(
        instance_id=instance_id,
        workflow_type=workflow_type,
        run_id=str(run.id),
        run_number=run.run_number,
        status=run.status,
        closed_reason=run.closed_reason,
        waiting_on=(_slot_wait(run) + waits_of(run.id)) if is_open else (),
        task_failure=task_failure_of(run.id) if is_open else None,
        namespace=namespace,
    )


def _slot_wait(run: RunRecord) -> tuple[Wait, ...]:
    if run.queue_slot != "waiting" or run.queue is None:
        return ()
    return (QueueSlotWait(queue=run.queue),)


def waits_of(run_id: uuid.UUID) -> tuple[Wait, ...]:
    """Open timers, signal and condition waits, activities and children in step order,
    then accepted updates not completed yet."""
    timeouts: dict[int, dt.datetime] = {}
    timers: list[StepWait] = []
    for row in Timer.objects.filter(run_id=run_id, status=TimerStatus.PENDING):
        if row.timer_kind:  # the timeout of a signal or condition wait
            timeouts[row.sequence] = row.fire_at
        else:
            timers.append(TimerWait(sequence=row.sequence, fire_at=row.fire_at))
    stepped: list[StepWait] = [*timers, *_open_waits(run_id, timeouts), *_activities(run_id)]
    stepped += [
        ChildWait(
            sequence=row.sequence,
            child_instance_id=row.child_instance_id,
            child_workflow_type=row.child_workflow_type,
            child_run_id=str(row.child_run_id) if row.child_run_id else None,
        )
        for row in ChildCall.objects.filter(
            parent_run_id=run_id, status__in=(ChildCallStatus.SCHEDULED, ChildCallStatus.STARTED)
        )
    ]
    stepped.sort(key=lambda wait: wait.sequence)
    waits: list[Wait] = list(stepped)
    updates = WorkflowUpdate.objects.filter(run_id=run_id, status=UpdateStatus.ACCEPTED)
    waits += [
        UpdateWait(update_id=str(row.id), update_name=row.update_name, accepted_at=row.accepted_at)
        for row in updates.order_by("accepted_at")
    ]
    return tuple(waits)


def _open_waits(run_id: uuid.UUID, timeouts: dict[int, dt.datetime]) -> list[StepWait]:
    events = HistoryEvent.objects.filter(run_id=run_id, event_type__in=_OPENS_WAIT + _CLOSES_WAIT)
    opened, closed = [], set()
    for event_type, payload in events.order_by("sequence").values_list("event_type", "payload"):
        if not isinstance(payload, dict):
            continue
        if event_type in _OPENS_WAIT:
            opened.append((event_type, payload))
        else:
            closed.add(payload.get("sequence"))
    waits: list[StepWait] = []
    for event_type, payload in opened:
        step = payload.get("sequence")
        if step in closed or not isinstance(step, int):
            continue
        timeout_at = timeouts.get(step)
        if event_type == EventType.SIGNAL_WAIT_OPENED:
            name = str(payload.get("signal_name") or "")
            waits.append(SignalWait(sequence=step, signal_name=name, timeout_at=timeout_at))
        else:
            key = payload.get("condition_key")
            waits.append(ConditionWait(sequence=step, condition_key=key, timeout_at=timeout_at))
    return waits


def _activities(run_id: uuid.UUID) -> list[StepWait]:
    rows = ActivityExecution.objects.filter(
        run_id=run_id, status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    )
    retries = {
        execution_id: available_at
        for execution_id, available_at in Task.objects.filter(
            run_id=run_id, task_type=TaskType.ACTIVITY, status=TaskStatus.READY
        ).values_list("activity_execution_id", "available_at")
    }
    queued = work_queues.waits_of_run(run_id)
    return [
        ActivityWait(
            sequence=row.sequence,
            activity_type=row.activity_type,
            activity_execution_id=str(row.id),
            status=row.status,
            attempt=row.attempt_count,
            next_attempt_at=retries.get(row.id) if row.attempt_count else None,
            waiting_for_queue=queued[row.id][0] if row.id in queued else None,
            waiting_reason=REASONS[queued[row.id][1]] if row.id in queued else None,
        )
        for row in rows
    ]


def task_failure_of(run_id: uuid.UUID) -> TaskFailure | None:
    """The failure of the run's last workflow task, when that task failed (the run is
    parked until it is repaired)."""
    task = (
        Task.objects.filter(run_id=run_id, task_type=TaskType.WORKFLOW)
        .order_by("-created_at", "-id")
        .only("id", "status", "last_error", "updated_at", "attempt_count")
        .first()
    )
    if task is None or task.status != TaskStatus.FAILED:
        return None
    row = (
        WorkflowFailure.objects.filter(
            run_id=run_id, source_kind="workflow_task", source_id=str(task.id)
        )
        .order_by("-created_at")
        .first()
    )
    if row is None:  # parked before failure rows named their task: the task's own note
        kind, _, message = task.last_error.partition(": ")
        return TaskFailure(
            exception_type=kind,
            exception_class=kind,
            message=message,
            traceback="",
            since=task.updated_at,
            task_id=str(task.id),
            failure_id=None,
            attempts=task.attempt_count,
        )
    return TaskFailure(
        exception_type=row.exception_type,
        exception_class=row.exception_class,
        message=row.message,
        traceback=row.traceback,
        since=row.created_at,
        task_id=str(task.id),
        failure_id=str(row.id),
        attempts=task.attempt_count,
    )
