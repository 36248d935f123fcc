"""Starting an activity attempt under a claimed task's lease.

Shared by the three ways a worker comes to hold an activity task: a claim from
its message, an eager start by the workflow task that scheduled it, and a
fan-out member taken after a sibling's result.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import observe
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.executor import eager, speculation
from durable_workflow.executor.identity import worker_id
from durable_workflow.executor.timeouts import attempt_deadlines
from durable_workflow.store import activities
from durable_workflow.store.records import ActivityRecord, RunRecord, TaskRecord


@dataclasses.dataclass(frozen=True)
class Lease:
    """The fencing identity of one claimed attempt."""

    task_id: uuid.UUID
    run_id: uuid.UUID
    lease_id: uuid.UUID
    generation: int
    attempt_id: uuid.UUID
    attempt_number: int
    execution: ActivityRecord
    instance_id: str
    payload_codec: str
    #: Taken after a sibling's result: its own result likely has siblings to take too.
    fan_out: bool = False
    workflow_type: str = ""
    started_at: dt.datetime | None = None


def start_eagerly(
    run: RunRecord, task: TaskRecord, execution: ActivityRecord, *, now: dt.datetime, sole: bool
) -> tuple[str, dict[str, Any]]:
    """Start an activity the current workflow task has just scheduled, leased to this
    process, to run once that transaction commits; returns its ``ActivityStarted`` event.

    ``sole``: the only activity the workflow task scheduled (its settle may then assume
    the run as this transaction leaves it, see ``speculation``).
    """
    lease, started = begin(run, task, execution, now=now, first=True)
    eager.offer(eager.ACTIVITY, lease)
    if sole:
        speculation.remember_at_commit(run)
    return started


def begin(
    run: RunRecord,
    claimed: TaskRecord,
    execution: ActivityRecord,
    *,
    now: dt.datetime,
    first: bool = False,
) -> tuple[Lease, tuple[str, dict[str, Any]]]:
    """A new attempt under the claimed task's lease, and its ``ActivityStarted`` event.

    ``first``: the execution was scheduled in this transaction and inserted already
    running (``activities.mark_started``).
    """
    assert claimed.lease_id is not None
    waited = (now - claimed.available_at).total_seconds()
    observe.task_started("activity", claimed.queue, claimed.connection, waited)
    if not first:
        activities.expire_attempt(execution.current_attempt_id, now=now)
    expires = now + dt.timedelta(seconds=get_settings().ACTIVITY_LEASE_SECONDS)
    attempt_id, number = activities.start_attempt(
        execution,
        task_id=claimed.id,
        owner=worker_id(),
        lease_expires_at=expires,
        now=now,
        deadlines=attempt_deadlines(execution.options, now),
        first=first,
    )
    started = {
        **attempt_fields(execution, attempt_id, number),
        "task_id": str(claimed.id),
        "lease_owner": worker_id(),
        "lease_expires_at": expires.isoformat(),
    }
    lease = Lease(
        task_id=claimed.id,
        run_id=run.id,
        lease_id=claimed.lease_id,
        generation=claimed.lease_generation,
        attempt_id=attempt_id,
        attempt_number=number,
        execution=execution,
        instance_id=run.instance_id,
        payload_codec=run.payload_codec,
        workflow_type=run.workflow_type,
        started_at=now,
    )
    return lease, (EventType.ACTIVITY_STARTED, started)


def attempt_fields(execution: ActivityRecord, attempt_id: uuid.UUID, number: int) -> dict[str, Any]:
    """What every event about one attempt of an activity says about it."""
    return {
        "sequence": execution.sequence,
        "activity_execution_id": str(execution.id),
        "activity_attempt_id": str(attempt_id),
        "activity_type": execution.activity_type,
        "activity_class": execution.activity_class,
        "attempt_number": number,
    }
