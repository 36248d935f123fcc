"""Continue-as-new: the run closes ``completed``/``continued`` and the instance's next run
starts in the same transaction, with what the old one carries over."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from durable_workflow.engine.events import EventType
from durable_workflow.executor import children, lifecycle
from durable_workflow.executor.closing import finish
from durable_workflow.executor.common import wake_workflow
from durable_workflow.executor.opening import Event, started_event
from durable_workflow.store import children as child_store
from durable_workflow.store import messages, runs
from durable_workflow.store.records import RunRecord


def continue_as_new(
    run: RunRecord,
    arguments: dict[str, Any],
    cursors: dict[str, int] | None = None,
    *,
    headers: dict[str, str] | None = None,
    now: dt.datetime,
) -> list[Event]:
    """Close this run ``completed``/``continued`` and start the next run of the instance.

    The new run inherits visibility (business key, labels, memo, search
    attributes), the start headers, the execution deadline (the run deadline starts afresh), the
    parent link, and every signal, update and message that was received but not
    yet consumed, in the order this run received them.
    """
    following, carried = _next_run(run, arguments, now=now)
    run.set(status="completed", closed_reason="continued", closed_at=now)
    events = finish(run, {}, now=now)
    started = started_event(
        following,
        arguments=arguments,
        details={"continued_from_run_id": str(run.id), "message_cursors": cursors or {}},
        memo=carried.get("memo") or {},
        search_attributes=carried.get("search_attributes") or {},
        parent_instance_id=_instance_of(run.parent_run_id),
        headers=headers,
    )
    carried_inputs = messages.carry_pending_inputs(run.id, following.id)
    lifecycle.append(following, [started, *carried_inputs], now=now)
    wake_workflow(following, now=now)
    following.set(status="pending")
    runs.save_run(following, now=now)
    if run.parent_run_id is not None and run.parent_sequence is not None:
        child_store.follow_run(run.parent_run_id, run.parent_sequence, following.id)
        children.wake_parent(run.parent_run_id, now=now)
    events.append(
        (
            EventType.WORKFLOW_CONTINUED_AS_NEW,
            {"new_run_id": str(following.id), "new_run_number": following.run_number},
        )
    )
    return events


def _next_run(
    run: RunRecord, arguments: dict[str, Any], *, now: dt.datetime
) -> tuple[RunRecord, dict[str, Any]]:
    """The instance's next run, and the fields it carried over from ``run``."""
    carried = runs.continuation_fields(run.id)
    if carried.get("run_timeout_seconds"):
        carried["run_deadline_at"] = now + dt.timedelta(seconds=carried["run_timeout_seconds"])
    following = runs.create_run(
        namespace=run.namespace,
        instance_id=run.instance_id,
        workflow_type=run.workflow_type,
        workflow_class=run.workflow_class,
        arguments=arguments,
        payload_codec=run.payload_codec,
        queue=run.queue,
        connection=run.connection,
        now=now,
        extra={
            **carried,
            "parent_run_id": run.parent_run_id,
            "parent_sequence": run.parent_sequence,
            "parent_close_policy": run.parent_close_policy,
            "continued_from_id": run.id,
        },
    )
    return following, carried


def _instance_of(run_id: uuid.UUID | None) -> str | None:
    if run_id is None:
        return None
    found = runs.get_run(run_id)
    return found.instance_id if found is not None else None
