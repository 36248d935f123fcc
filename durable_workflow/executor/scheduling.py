"""Inserting the activities a workflow task schedules, a run of them at a time.

Consecutive ``ScheduleActivity`` commands become two inserts (all executions, then
all tasks), so a fan-out of a thousand costs two statements, not two thousand.
One activity the process should run itself may be inserted leased to it
(:mod:`durable_workflow.executor.eager`); the others are published.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.conf import get_settings
from durable_workflow.engine import commands as c
from durable_workflow.engine.events import EventType
from durable_workflow.executor import dispatch, eager, local_activities, queue_gate
from durable_workflow.executor.common import check_limit
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.timeouts import schedule_deadlines
from durable_workflow.headers import with_headers
from durable_workflow.ids import uuid7
from durable_workflow.models import TaskStatus, TaskType
from durable_workflow.store import activities, database, sql, tasks
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


class ActivityBatch:
    """Consecutive activities of one workflow task; their events keep the body's order,
    their rows wait for :meth:`flush`."""

    def __init__(self, run: RunRecord, now: dt.datetime, eager_ok: bool) -> None:
        self.run, self.now, self.eager_ok = run, now, eager_ok
        self.executions: list[sql.Built] = []
        self.tasks: list[sql.Built] = []
        #: The limited queues of those tasks: their tasks wait for a wake, unsent.
        self.limited: set[str] = set()

    def add(self, command: c.ScheduleActivity) -> list[Event]:
        check_limit("payload_size_bytes", envelope.encoded_size(command.arguments))
        run, now = self.run, self.now
        local = command.options.get("execution_mode") == "local"
        session_id = (command.options.get("worker_session") or {}).get("session_id")
        # The ids and routing the events name, kept here rather than read back from the
        # unsaved rows (which declare no attributes).
        execution_id = uuid7()
        queue = None if local else command.queue or get_settings().DEFAULT_QUEUE
        connection = None if local else command.connection
        execution = activities.build_execution(
            id=execution_id,
            run_id=run.id,
            sequence=command.step,
            activity_type=command.activity_type,
            activity_class=command.activity_class,
            arguments=command.arguments,
            options=command.options,
            queue=queue,
            connection=connection,
            now=now,
            deadlines=None if local else schedule_deadlines(command.options, now),
            worker_session_id=session_id,
        )
        self.executions.append(execution)
        payload: dict[str, Any] = {
            "sequence": command.step,
            "activity_execution_id": str(execution_id),
            "activity_type": command.activity_type,
            "activity_class": command.activity_class,
            **(command.group or {}),
        }
        with_headers(payload, command.options.get("headers"))
        if local:  # runs in this process: no activity task, no queue
            payload.update(execution_mode="local", local_activity=True)
            return [(EventType.ACTIVITY_SCHEDULED, payload)]
        task_id = uuid7()
        # A limited queue's task is never sent from here: the wake after commit sends as
        # many as have room, most urgent first, instead of a message per task the claim
        # would refuse.
        wait = queue_gate.first_wait(queue) if queue_gate.limited(queue) else None
        task = tasks.build_task(
            id=task_id,
            run_id=run.id,
            namespace=run.namespace,
            task_type=TaskType.ACTIVITY,
            available_at=now,
            queue=queue,
            connection=connection,
            activity_execution_id=execution_id,
            now=now,
            payload={"worker_session_id": session_id} if session_id else None,
            compatibility=run.compatibility,
            priority=command.options.get("priority"),
            queue_wait=wait,
        )
        if wait is not None and queue is not None:  # (a queue with no name has no limit)
            self.limited.add(queue)
        elif self.eager_ok and eager.wanted(run, execution):
            self.eager_ok = False
            task = tasks.lease_new(
                task,
                owner=worker_id(),
                now=now,
                lease_seconds=get_settings().ACTIVITY_LEASE_SECONDS,
            )
            activities.mark_started(execution, now=now)  # inserted running: see attempts.begin
        self.tasks.append(task)
        payload.update(queue=queue, connection=connection, task_id=str(task_id))
        if session_id:
            payload["worker_session_id"] = session_id
        return [(EventType.ACTIVITY_SCHEDULED, payload)]

    def flush(self) -> None:
        if not self.executions:
            return
        records = {r.id: r for r in activities.save_executions(self.executions)}
        for record in records.values():
            if record.options.get("execution_mode") == "local":  # it starts in this task
                local_activities.fresh.executions[(record.run_id, record.sequence)] = record
        limited, self.limited = self.limited, set()
        for task in tasks.save_tasks(self.tasks):
            if task.status == TaskStatus.LEASED:
                assert task.activity_execution_id is not None  # built with its execution
                eager.keep(task, records[task.activity_execution_id], sole=len(self.tasks) == 1)
            elif task.queue not in limited:
                dispatch.enqueue(task)
        for queue in sorted(limited):
            database.on_commit(functools.partial(queue_gate.wake, queue), robust=True)
        self.executions, self.tasks = [], []
