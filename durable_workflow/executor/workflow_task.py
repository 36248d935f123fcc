"""A workflow task: lock the run, replay its history, persist what the body asked for.

All of it happens in one transaction. If replay hits an engine-level error
(non-determinism, a body touching the ORM, an unknown workflow type), the
savepoint is rolled back, the task is marked failed with the reason, and the
run itself is left exactly as it was, ready for ``repair`` once code is fixed.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction

from durable_workflow import clock, registry
from durable_workflow.conf import get_settings
from durable_workflow.engine.commands import (
    CloseCommand,
    Command,
    CompleteWorkflow,
    FailWorkflow,
    RecordFailureHandled,
    RecordSideEffect,
    ScheduleActivity,
    StartTimer,
)
from durable_workflow.engine.events import EventType
from durable_workflow.engine.failures import describe
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.exceptions import (
    NonDeterminismError,
    PayloadCodecError,
    UnknownTypeError,
    WorkflowOrmAccessError,
)
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import orm_guard, retry_when_locked, worker_id
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    FailureCategory,
    RunStatus,
    TaskStatus,
    TaskType,
)
from durable_workflow.store import activities, commands, history, runs, tasks
from durable_workflow.store.records import RunRecord

logger = logging.getLogger("durable_workflow")

#: Errors that mean "this code cannot make progress on this history".
TASK_FAILURES = (NonDeterminismError, WorkflowOrmAccessError, UnknownTypeError, PayloadCodecError)


@retry_when_locked
def run_workflow_task(task_id: Any) -> str:
    """Execute one workflow task; returns ``completed``, ``skipped`` or ``failed``."""
    now = clock.now()
    with transaction.atomic():
        task = tasks.get(task_id)
        if task is None or task.status != TaskStatus.READY:
            return "skipped"
        run = runs.lock_run(task.run_id)
        settings = get_settings()
        claimed = tasks.claim(
            task, owner=worker_id(), now=now, lease_seconds=settings.WORKFLOW_TASK_LEASE_SECONDS
        )
        if run is None or claimed is None:
            return "skipped"
        if run.status in TERMINAL_RUN_STATUSES:
            tasks.settle(claimed.id, TaskStatus.CANCELLED, now=now)
            return "skipped"
        try:
            with transaction.atomic():
                _advance(run, now=now)
        except TASK_FAILURES as exc:
            _record_task_failure(run, claimed.id, exc, now=now)
            return "failed"
        tasks.settle(claimed.id, TaskStatus.COMPLETED, now=now)
        runs.save_run(run, now=now)
    return "completed"


def _advance(run: RunRecord, *, now: dt.datetime) -> None:
    cls: Any = registry.workflow_class(run.workflow_type)
    runtime = WorkflowRuntime(
        factory=lambda: cls._dw_instantiate(runtime),
        workflow_id=run.instance_id,
        run_id=str(run.id),
        codec=run.payload_codec,
    )
    try:
        with orm_guard():
            runtime.feed(history.load_history(run.id))
        events = _persist_commands(run, runtime.take_commands(), now=now)
        if runtime.closed is not None:
            events += _close(run, runtime.closed, now=now)
        else:
            run.set(status=RunStatus.WAITING)
        history.append_events(run, events, now=now)
        run.set(last_progress_at=now)
    finally:
        runtime.dispose()


def _persist_commands(
    run: RunRecord, new: list[Command], *, now: dt.datetime
) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    default_queue = get_settings().DEFAULT_QUEUE
    for command in new:
        if isinstance(command, ScheduleActivity):
            execution = activities.create_execution(
                run_id=run.id,
                sequence=command.step,
                activity_type=command.activity_type,
                activity_class=command.activity_class,
                arguments=command.arguments,
                options=command.options,
                queue=command.queue or default_queue,
                connection=command.connection,
                now=now,
            )
            task = tasks.create_task(
                run_id=run.id,
                task_type=TaskType.ACTIVITY,
                available_at=now,
                queue=execution.queue,
                connection=execution.connection,
                activity_execution_id=execution.id,
                now=now,
            )
            dispatch.enqueue(task)
            events.append(
                (
                    EventType.ACTIVITY_SCHEDULED,
                    {
                        "sequence": command.step,
                        "activity_execution_id": str(execution.id),
                        "activity_type": command.activity_type,
                        "activity_class": command.activity_class,
                        "queue": execution.queue,
                        "connection": execution.connection,
                        "task_id": str(task.id),
                    },
                )
            )
        elif isinstance(command, StartTimer):
            events += _start_timer(run, command, now=now)
        elif isinstance(command, RecordSideEffect):
            events.append(
                (
                    EventType.SIDE_EFFECT_RECORDED,
                    {"sequence": command.step, "result": command.result},
                )
            )
        elif isinstance(command, RecordFailureHandled):
            events.append(
                (
                    EventType.FAILURE_HANDLED,
                    {
                        "sequence": command.step,
                        "exception_type": command.exception_type,
                        "message": command.message,
                    },
                )
            )
    return events


def _start_timer(
    run: RunRecord, command: StartTimer, *, now: dt.datetime
) -> list[tuple[str, dict[str, Any]]]:
    fire_at = now + dt.timedelta(seconds=command.delay_seconds)
    inline = command.delay_seconds == 0
    timer = activities.create_timer(
        run_id=run.id,
        sequence=command.step,
        delay_seconds=command.delay_seconds,
        fire_at=fire_at,
        now=now,
        fired=inline,
    )
    scheduled = {
        "sequence": command.step,
        "timer_id": str(timer.id),
        "delay_seconds": command.delay_seconds,
        "fire_at": fire_at.isoformat(),
    }
    if inline:
        fired = {**scheduled, "fired_at": now.isoformat()}
        del fired["fire_at"]
        return [(EventType.TIMER_SCHEDULED, scheduled), (EventType.TIMER_FIRED, fired)]
    task = tasks.create_task(
        run_id=run.id,
        task_type=TaskType.TIMER,
        available_at=fire_at,
        queue=run.queue,
        connection=run.connection,
        timer_id=timer.id,
        now=now,
    )
    dispatch.enqueue(task)
    return [(EventType.TIMER_SCHEDULED, scheduled)]


def _close(
    run: RunRecord, closed: CloseCommand, *, now: dt.datetime
) -> list[tuple[str, dict[str, Any]]]:
    tasks.settle_open_tasks_of_run(run.id, TaskStatus.CANCELLED, now=now)
    if isinstance(closed, CompleteWorkflow):
        run.set(
            status=RunStatus.COMPLETED,
            closed_reason="completed",
            output=closed.result,
            closed_at=now,
        )
        return [(EventType.WORKFLOW_COMPLETED, {"result": closed.result})]
    assert isinstance(closed, FailWorkflow)
    info = closed.failure
    failure_id = commands.record_failure(
        run_id=run.id,
        source_kind="workflow_run",
        source_id=str(run.id),
        failure_category=info.category,
        exception_type=info.exception_type,
        exception_class=info.exception_class,
        message=info.message,
        traceback=info.traceback,
        non_retryable=info.non_retryable,
        now=now,
    )
    run.set(status=RunStatus.FAILED, closed_reason="failed", closed_at=now)
    return [
        (
            EventType.WORKFLOW_FAILED,
            {
                "failure_id": str(failure_id),
                "failure_category": info.category,
                "exception_type": info.exception_type,
                "exception_class": info.exception_class,
                "message": info.message,
            },
        )
    ]


def _record_task_failure(run: RunRecord, task_id: Any, exc: Exception, *, now: dt.datetime) -> None:
    """Leave the run untouched; keep the reason on the task and a failure row."""
    info = describe(exc, category=FailureCategory.TASK_FAILURE)
    commands.record_failure(
        run_id=run.id,
        source_kind="workflow_task",
        source_id=str(task_id),
        failure_category=FailureCategory.TASK_FAILURE,
        exception_type=info.exception_type,
        exception_class=info.exception_class,
        message=info.message,
        traceback=info.traceback,
        non_retryable=False,
        now=now,
    )
    tasks.settle(task_id, TaskStatus.FAILED, now=now, error=f"{type(exc).__name__}: {exc}")
    logger.error("workflow task %s of run %s failed: %s", task_id, run.id, exc)
