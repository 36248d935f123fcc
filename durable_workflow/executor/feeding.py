"""Feeding a workflow task's runtime the events it has not seen, and persisting the
commands the body asked for, inside the project's ``execute_workflow_task`` interceptors.

:mod:`durable_workflow.executor.workflow_task` calls :func:`feed_and_persist` once per
task, under the run lock and the task's savepoint; what is fed and what it appends
afterwards (closing the run, an eagerly leased activity) stays there.
"""

from __future__ import annotations

import datetime as dt

from durable_workflow import interceptors, observe
from durable_workflow.engine.events import EventType, HistoryEvent
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.executor import lifecycle
from durable_workflow.executor.persist import Event, persist
from durable_workflow.headers import stored
from durable_workflow.models import WorkflowRun
from durable_workflow.store import savepoints, sql
from durable_workflow.store.records import RunRecord


def feed_and_persist(
    run: RunRecord, runtime: WorkflowRuntime, tail: list[HistoryEvent], *, now: dt.datetime
) -> list[Event]:
    """Feed the runtime, persist what it asked for; the events still to append.

    When the body waits for an outcome those commands record at once (a child's
    start, a signal's outcome), the events are appended and fed back, and the body
    goes on in this same task.
    """
    observe.replayed(run.workflow_type, len(tail))
    events: list[Event] = []

    def feed(_: interceptors.ExecuteWorkflowTaskInput) -> None:
        events.extend(_feed_and_persist_once(run, runtime, tail, now=now))

    task_input = _task_input(run, runtime, tail)
    if not interceptors.intercepted("execute_workflow_task"):
        feed(task_input)
        return events

    def feed_and_hand_back(task_input: interceptors.ExecuteWorkflowTaskInput) -> None:
        feed(task_input)
        sql.flush()  # the interceptor goes on after the engine's writes

    # A project's code: it runs after what the engine held back, in its own savepoint.
    with savepoints.foreign(WorkflowRun):
        interceptors.call("execute_workflow_task", task_input, feed_and_hand_back)
    return events


def _task_input(
    run: RunRecord, runtime: WorkflowRuntime, tail: list[HistoryEvent]
) -> interceptors.ExecuteWorkflowTaskInput:
    boundary = runtime.replayed_through = run.workflow_task_sequence
    headers = runtime.start_headers
    if not headers:
        started = next((e for e in tail if e.event_type == EventType.WORKFLOW_STARTED), None)
        headers = stored(started.payload) if started is not None else {}
    return interceptors.ExecuteWorkflowTaskInput(
        workflow_type=run.workflow_type,
        instance_id=run.instance_id,
        run_id=str(run.id),
        attempt=runtime.task_attempt,
        events=len(tail),
        replayed_events=sum(1 for e in tail if e.sequence <= boundary),
        sticky=runtime.last_sequence > 0,
        headers=dict(headers),
    )


def _feed_and_persist_once(
    run: RunRecord, runtime: WorkflowRuntime, tail: list[HistoryEvent], *, now: dt.datetime
) -> list[Event]:
    runtime.feed(tail)
    while True:
        commands = runtime.take_commands()
        refeed = runtime.take_refeed()
        running = runtime.closed is None and not runtime.local_requests
        events = persist(run, commands, now=now, eager_ok=running and not refeed)
        if not (refeed and running):
            return events
        lifecycle.append(run, events, now=now)
        # As a later read would return them (JSON values), so replay sees the same.
        runtime.feed([e for e in run.appended if e.sequence > runtime.last_sequence])
