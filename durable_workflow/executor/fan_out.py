"""Fan-out members a worker takes after finishing one of their siblings.

A fan-out's members are published, one message each, so that every worker of the
queue can share them. A worker that has just recorded one member's result takes
the next waiting ones itself, in that same transaction (``ActivityStarted`` and
a lease to this process), and runs them right after the commit; their messages
then find the tasks taken. After quick members (under ``QUICK_SECONDS`` each) it
takes up to ``EAGER_SIBLING_BATCH`` at once and settles their results together,
one transaction and one run lock for the lot; after a slow one, just one, so
that slow members still spread over idle workers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.executor import compatibility, eager
from durable_workflow.executor.attempts import begin
from durable_workflow.executor.identity import worker_id
from durable_workflow.models import ActivityStatus, WorkflowRun
from durable_workflow.store import activities, sql, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord

#: Members that each ran for less than this are followed by several siblings at once.
QUICK_SECONDS = 0.010


def wanted(quick: bool) -> int:
    """How many waiting fan-out members this process should take after a result."""
    if not eager.activities_on():
        return 0
    return max(0, min(get_settings().EAGER_SIBLING_BATCH if quick else 1, eager.room()))


def take(
    run: RunRecord, done: ActivityRecord, *, now: dt.datetime, found: list[Any], count: int
) -> list[tuple[str, dict[str, Any]]]:
    """A fan-out member finished here: lease up to ``count`` waiting siblings to this
    process, to run once this transaction commits (their messages then find them
    taken), rather than wait for the broker; their ``ActivityStarted`` events.

    ``found``: those siblings' tasks and executions, when the settle read them with the
    run lock (a task whose execution is not among them is left alone), or empty to read
    them here.
    """
    ready, executions = found or sql.together(
        WorkflowRun, statements(run.id, done, now=now, count=count)
    )
    chosen = [
        (task, executions[task.activity_execution_id])
        for task in ready
        if task.activity_execution_id in executions
        and compatibility.accepts(task)
        and executions[task.activity_execution_id].status
        in (ActivityStatus.PENDING, ActivityStatus.RUNNING)
        and eager.sibling_ok(done, executions[task.activity_execution_id])
    ]
    if not chosen:
        return []
    lease_seconds = get_settings().ACTIVITY_LEASE_SECONDS
    claims = sql.together(
        WorkflowRun,
        [
            tasks.claim_statement(task, owner=worker_id(), now=now, lease_seconds=lease_seconds)
            for task, _ in chosen
        ],
    )
    events, leases = [], []
    for (_, sibling), claimed in zip(chosen, claims, strict=True):
        if claimed is not None:
            lease, started = begin(run, claimed, sibling, now=now)
            leases.append(dataclasses.replace(lease, fan_out=True))
            events.append(started)
    if len(leases) == 1:
        eager.offer(eager.ACTIVITY, leases[0])
    elif leases:
        eager.offer(eager.ACTIVITIES, leases)
    return events


def statements(
    run_id: uuid.UUID, done: ActivityRecord, *, now: dt.datetime, count: int
) -> list[sql.Statement[Any]]:
    """The reads :func:`take` needs, to send with the settle's run lock (``found``)."""
    ready, execution_ids = tasks.next_ready_activities(
        run_id, queue=done.queue, connection=done.connection, now=now, limit=count
    )
    return [ready, activities.executions_statement(execution_ids)]
