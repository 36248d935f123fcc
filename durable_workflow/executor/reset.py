"""Reset and fork: a new run that replays a kept prefix of an old run's history.

``reset`` starts the new run in the same instance (it becomes the current run; an
old run still open is terminated with reason ``reset``); ``fork`` starts it in a
new instance and leaves the old run exactly as it was. ``engine.rewind`` decides
what is kept; this module checks the run, writes both runs' lineage, copies the
events and wakes the new run, all in one transaction. A refused point writes
nothing and raises ``ResetRefusedError`` with the reason.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, compatibility
from durable_workflow.engine import rewind
from durable_workflow.engine.events import EventType
from durable_workflow.engine.events import HistoryEvent as Event
from durable_workflow.exceptions import (
    InvalidValueError,
    ResetRefusedError,
    WorkflowNotFoundError,
)
from durable_workflow.executor import lifecycle, workflow_gate
from durable_workflow.executor.closing import close_as
from durable_workflow.executor.common import retry_transaction, wake_workflow
from durable_workflow.executor.intake import check_request_id, repeated_request
from durable_workflow.ids import validate_instance_id
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    CommandStatus,
    CommandType,
    RunStatus,
    SignalStatus,
)
from durable_workflow.results import ResetResult
from durable_workflow.store import commands, database, history, messages, runs, tasks, waits
from durable_workflow.store import visibility as visibility_store
from durable_workflow.store.records import RunRecord
from durable_workflow.text import check_reason

#: The reason an open run is terminated with when a reset replaces it.
TERMINATE_REASON = "reset"


def check_point(to: object) -> str | int:
    """``to`` as the API takes it: a point kind or a positive event sequence."""
    if isinstance(to, int) and not isinstance(to, bool) and to > 0:
        return to
    if isinstance(to, str) and to in rewind.POINT_KINDS:
        return to
    raise InvalidValueError(
        f"reset point must be one of {', '.join(rewind.POINT_KINDS)} or an event sequence",
        field="to",
        reason="unknown_point",
    )


def _run_uuid(run_id: object) -> uuid.UUID:
    try:
        return run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))
    except ValueError:
        raise InvalidValueError("not a run id", field="run_id", reason="invalid") from None


@retry_transaction
def reset_run(
    run_id: str | uuid.UUID,
    *,
    to: str | int,
    reason: str | None = None,
    new_instance_id: str | None = None,
    source: str = "client",
    dry_run: bool = False,
    request_id: str | None = None,
) -> ResetResult:
    """Reset (``new_instance_id=None``) or fork the run ``run_id`` to the point ``to``.

    A ``request_id`` the instance (the fork's, for a fork) already took a reset (fork)
    under returns that first result and rewinds nothing; a dry run records nothing and
    is never matched."""
    to = check_point(to)
    check_reason(reason)
    check_request_id(request_id)
    old_id = _run_uuid(run_id)
    if new_instance_id is not None:
        validate_instance_id(new_instance_id)
    now = clock.now()
    with database.atomic():
        if request_id is not None and not dry_run:
            repeated = _repeated(old_id, new_instance_id, request_id, now=now)
            if repeated is not None:
                return repeated
        old = _locked(old_id, fork=new_instance_id is not None)
        parked = old.status not in TERMINAL_RUN_STATUSES and bool(waits.task_failure_of(old.id))
        try:
            plan = rewind.plan(history.load_history(old.id), to, parked=parked)
        except rewind.RefusedPoint as exc:
            raise ResetRefusedError(exc.reason, str(exc)) from None
        target = new_instance_id or old.instance_id
        if new_instance_id is not None:
            _reserve_fork(new_instance_id, old.workflow_type, namespace=old.namespace, now=now)
        point = {**plan.describe(), "reason": reason or ""}
        kind = "reset" if new_instance_id is None else "fork"
        if dry_run:
            return ResetResult(target, None, str(old.id), point, kind, dry_run=True)
        return _write(
            old, plan, target, point, kind=kind, source=source, request_id=request_id, now=now
        )


def _repeated(
    old_id: uuid.UUID, new_instance_id: str | None, request_id: str, *, now: dt.datetime
) -> ResetResult | None:
    """The result of the reset (fork) recorded under ``request_id``, if there is one;
    holds the instance lock (a fork's instance is reserved first, so two deliveries of
    one fork queue on its row too)."""
    found = runs.get_run(old_id)
    if found is None:
        return None  # _locked reports it
    # A fork stays in the namespace of the run it forks.
    target, space = new_instance_id or found.instance_id, found.namespace
    if new_instance_id is not None:
        runs.reserve_instance(target, found.workflow_type, namespace=space, now=now)
    runs.lock_instance(target, namespace=space)
    kind = "reset" if new_instance_id is None else "fork"
    command_type = CommandType.RESET if kind == "reset" else CommandType.FORK
    prior = repeated_request(target, command_type, request_id, namespace=space)
    if prior is None:
        return None
    payload = prior.payload
    return ResetResult(
        instance_id=target,
        run_id=str(payload["run_id"]),
        reset_from_run_id=str(payload["reset_from_run_id"]),
        reset_point=dict(payload.get("reset_point") or {}),
        kind=kind,
        terminated_old_run=bool(payload.get("terminated_old_run")),
        command_id=str(prior.command.id),
    )


def _locked(old_id: uuid.UUID, *, fork: bool) -> RunRecord:
    found = runs.get_run(old_id)
    if found is None:
        raise WorkflowNotFoundError(f"no workflow run {old_id}")
    if not fork:
        runs.lock_instance(found.instance_id, namespace=found.namespace)
    old = runs.lock_run(old_id)
    assert old is not None
    if old.closed_reason == "continued":
        raise ResetRefusedError("continued_as_new", rewind.REFUSALS["continued_as_new"])
    if not fork:
        current = runs.current_run(old.instance_id, namespace=old.namespace)
        if current is None or current.id != old.id:
            raise ResetRefusedError("not_current_run", rewind.REFUSALS["not_current_run"])
        if old.parent_run_id is not None:
            raise ResetRefusedError("child_run", rewind.REFUSALS["child_run"])
    if old.status not in TERMINAL_RUN_STATUSES and tasks.workflow_task_in_progress(
        old.id, now=clock.now()
    ):
        raise ResetRefusedError("workflow_task_running", rewind.REFUSALS["workflow_task_running"])
    return old


def _reserve_fork(
    instance_id: str, workflow_type: str, *, namespace: str, now: dt.datetime
) -> None:
    runs.reserve_instance(instance_id, workflow_type, namespace=namespace, now=now)
    instance = runs.lock_instance(instance_id, namespace=namespace)
    if instance is None or instance.current_run_id is not None:
        raise ResetRefusedError(
            "instance_exists", f"instance_exists: {instance_id!r} already has a run"
        )


def _write(
    old: RunRecord,
    plan: rewind.Plan,
    target: str,
    point: dict[str, Any],
    *,
    kind: str,
    source: str,
    request_id: str | None = None,
    now: dt.datetime,
) -> ResetResult:
    new = _new_run(old, target, point, fork=kind == "fork", now=now)
    terminated = kind == "reset" and old.status not in TERMINAL_RUN_STATUSES
    payload: dict[str, Any] = {
        "reset_from_run_id": str(old.id),
        "run_id": str(new.id),
        "reset_point": point,
        "terminated_old_run": terminated,
    }
    if request_id is not None:
        payload["request_id"] = request_id
    command = commands.record_command(
        namespace=old.namespace,
        instance_id=target,
        run_id=old.id if kind == "reset" else new.id,
        command_type=CommandType.RESET if kind == "reset" else CommandType.FORK,
        status=CommandStatus.ACCEPTED,
        outcome="reset" if kind == "reset" else "forked",
        source=source,
        reason=point["reason"],
        payload=payload,
        now=now,
    )
    if terminated:
        _terminate(old, str(command.id), point["reason"], now=now)
    history.copy_events(new, _events_for(new, old, plan, now=now))
    wake_workflow(new, now=now)
    new.set(status=RunStatus.PENDING)
    runs.save_run(new, now=now)
    if kind == "reset":
        runs.record_reset(old.id, reset_to=new.id, point=point)
    return ResetResult(
        instance_id=target,
        run_id=str(new.id),
        reset_from_run_id=str(old.id),
        reset_point=point,
        kind=kind,
        terminated_old_run=terminated,
        command_id=str(command.id),
    )


def _terminate(old: RunRecord, command_id: str, reason: str, *, now: dt.datetime) -> None:
    why = f"{TERMINATE_REASON}: {reason}" if reason else TERMINATE_REASON
    requested = {"command_id": command_id, "reason": why}
    events: list[tuple[str, dict[str, Any]]] = [(EventType.TERMINATE_REQUESTED, requested)]
    events += close_as(
        old,
        status=RunStatus.TERMINATED,
        event_type=EventType.WORKFLOW_TERMINATED,
        category="terminated",
        exception_type="WorkflowTerminated",
        message="the run was reset",
        reason=why,
        now=now,
    )
    lifecycle.append(old, events, now=now)
    runs.save_run(old, now=now)


def _new_run(
    old: RunRecord, target: str, point: dict[str, Any], *, fork: bool, now: dt.datetime
) -> RunRecord:
    carried = runs.continuation_fields(old.id)
    if fork and carried.get("execution_timeout_seconds"):  # a new execution
        seconds = carried["execution_timeout_seconds"]
        carried["execution_deadline_at"] = now + dt.timedelta(seconds=seconds)
    if carried.get("run_timeout_seconds"):
        carried["run_deadline_at"] = now + dt.timedelta(seconds=carried["run_timeout_seconds"])
    # The current build replays the prefix and runs the rest.
    carried["compatibility"] = compatibility.current_marker()
    if fork:  # a new execution queues for a slot of its own; a reset keeps the old one's
        carried.pop("queue_slot", None)
    new = runs.create_run(
        namespace=old.namespace,
        instance_id=target,
        workflow_type=old.workflow_type,
        workflow_class=old.workflow_class,
        arguments=old.arguments,
        payload_codec=old.payload_codec,
        queue=old.queue,
        connection=old.connection,
        now=now,
        extra={**carried, "reset_from_run_id": old.id, "reset_point": point},
    )
    # The fingerprint the prefix was recorded under (``patched()`` reads it).
    new.set(workflow_definition_fingerprint=old.workflow_definition_fingerprint)
    if fork:
        workflow_gate.enter(new, now=now)
    if carried.get("search_attributes"):
        visibility_store.replace_attributes(new.id, carried["search_attributes"])
    return new


def _events_for(
    new: RunRecord, old: RunRecord, plan: rewind.Plan, *, now: dt.datetime
) -> list[Event]:
    """The kept prefix (``WorkflowStarted`` naming the new run), then the re-applied
    signals. Signals the new run will apply get rows of their own in the new run, so
    nothing the new run does changes the old run's rows."""
    redo = {e.sequence for e in rewind.unapplied_signals(plan.kept)}
    redo |= {e.sequence for e in plan.reapplied}
    events: list[Event] = []
    for event in [*plan.kept, *plan.reapplied]:
        position = new.next_sequence + len(events)
        payload = dict(event.payload)
        if event.event_type == EventType.WORKFLOW_STARTED:
            payload.update(
                workflow_instance_id=new.instance_id,
                workflow_run_id=str(new.id),
                run_number=new.run_number,
                reset_from_run_id=str(old.id),
            )
        elif event.sequence in redo:
            payload = _signal_again(new, payload, position, now=now)
        events.append(Event(position, event.event_type, payload, event.recorded_at))
    return events


def _signal_again(
    new: RunRecord, payload: dict[str, Any], position: int, *, now: dt.datetime
) -> dict[str, Any]:
    """A signal of the old run received again by the new run: its own command and row."""
    name = str(payload.get("signal_name") or "")
    command = commands.record_command(
        namespace=new.namespace,
        instance_id=new.instance_id,
        run_id=new.id,
        command_type=CommandType.SIGNAL,
        status=CommandStatus.ACCEPTED,
        outcome="signal_received",
        source="reset",
        payload={"signal_name": name, "reapplied_from_signal_id": payload.get("signal_id")},
        now=now,
    )
    signal_id = messages.create_signal(
        instance_id=new.instance_id,
        run_id=new.id,
        command_id=command.id,
        name=name,
        arguments=payload.get("arguments") or {},
        status=SignalStatus.RECEIVED,
        received_sequence=position,
        now=now,
    )
    return {
        **payload,
        "signal_id": str(signal_id),
        "command_id": str(command.id),
        "reapplied_from_signal_id": payload.get("signal_id"),
    }
