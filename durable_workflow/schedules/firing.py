"""One fire of a schedule: apply the overlap policy, claim the slot, start the run.

Every function here runs inside the caller's transaction, with the schedule row
locked, and edits the ``ScheduleRecord`` it is given; the caller saves it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from typing import Any

from durable_workflow import interceptors, registry
from durable_workflow.executor import start_workflow
from durable_workflow.executor.closing import request_cancel, request_terminate
from durable_workflow.executor.start import StartOutcome
from durable_workflow.models import TERMINAL_RUN_STATUSES
from durable_workflow.models.schedules import ScheduleFireKind, ScheduleFireStatus
from durable_workflow.options import StartOptions
from durable_workflow.schedules import store
from durable_workflow.schedules.audit import (
    CommandContext,
    ScheduleEventType,
    build_payload,
    timestamp,
)
from durable_workflow.schedules.policies import (
    BUFFER_POLICIES,
    DELETE_REASON_MAX_RUNS,
    Outcome,
    ScheduleOverlapPolicy,
    ScheduleStatus,
    SkipReason,
)
from durable_workflow.schedules.records import ScheduleRecord
from durable_workflow.store import runs

Policy = ScheduleOverlapPolicy


@dataclasses.dataclass
class FireResult:
    """One row of a tick, trigger or backfill report."""

    schedule_id: str
    namespace: str
    outcome: str
    occurrence_time: dt.datetime | None = None
    instance_id: str | None = None
    run_id: str | None = None
    reason: str | None = None
    last_fired_at: dt.datetime | None = None
    next_fire_at: dt.datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def instance_id_for(
    schedule_id: str,
    occurrence: dt.datetime,
    *,
    kind: str = ScheduleFireKind.TICK,
    ordinal: int = 0,
) -> str:
    """The instance id of a fire slot; whole seconds stay short.

    ``schedule:{id}:{UTC time}`` for a scheduled fire, ``schedule:{id}:backfill:{UTC
    time}`` for a backfilled one and ``schedule:{id}:manual:{UTC time}:{ordinal}``
    for the ``ordinal``-th manual trigger: a manual trigger never takes a scheduled
    slot, nor another manual trigger's at the same instant.
    """
    moment = occurrence.astimezone(dt.UTC)
    text = moment.strftime("%Y%m%dT%H%M%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    if kind == ScheduleFireKind.MANUAL:
        return f"schedule:{schedule_id}:manual:{text}Z:{ordinal}"
    middle = "backfill:" if kind == ScheduleFireKind.BACKFILL else ""
    return f"schedule:{schedule_id}:{middle}{text}Z"


def next_fire_time(schedule: ScheduleRecord, *, after: dt.datetime) -> dt.datetime | None:
    """The next canonical time after ``after``, plus a fresh jitter roll (inclusive)."""
    canonical = schedule.parsed_spec().next_after(after)
    if canonical is None or not schedule.jitter_seconds:
        return canonical
    return canonical + dt.timedelta(seconds=random.randint(0, schedule.jitter_seconds))


def previous_run_active(schedule: ScheduleRecord) -> bool:
    if not schedule.latest_instance_id:
        return False
    run = runs.current_run(schedule.latest_instance_id, namespace=schedule.namespace)
    return run is not None and run.status not in TERMINAL_RUN_STATUSES


def fire(
    schedule: ScheduleRecord,
    *,
    occurrence: dt.datetime,
    kind: str,
    policy: ScheduleOverlapPolicy | str,
    now: dt.datetime,
    context: CommandContext | None = None,
) -> FireResult:
    """Evaluate one occurrence: start, buffer or skip it (buffering only off backfill)."""
    policy = Policy(policy)
    ordinal = store.manual_fire_count(schedule) + 1 if kind == ScheduleFireKind.MANUAL else 0
    instance_id = instance_id_for(schedule.schedule_id, occurrence, kind=kind, ordinal=ordinal)
    if schedule.remaining_actions == 0:
        return skip(schedule, SkipReason.REMAINING_ACTIONS_EXHAUSTED, occurrence, now, context)
    # A buffering schedule with fires already waiting queues behind them.
    queued = policy in BUFFER_POLICIES and schedule.buffered_count > 0
    blocked = queued or previous_run_active(schedule)
    buffer_has_room = policy == Policy.BUFFER_ALL or schedule.buffered_count == 0
    if blocked and policy in BUFFER_POLICIES and buffer_has_room:
        return _buffer(schedule, instance_id, kind, occurrence, now)
    if blocked and policy in (Policy.SKIP, Policy.BUFFER_ONE):
        if not store.claim_fire(
            schedule,
            instance_id=instance_id,
            kind=kind,
            status=ScheduleFireStatus.SKIPPED,
            occurrence_time=occurrence,
            skip_reason=SkipReason.OVERLAP_POLICY_SKIP,
            now=now,
        ):
            return _already_fired(schedule, instance_id, occurrence)
        return skip(schedule, SkipReason.OVERLAP_POLICY_SKIP, occurrence, now, context)
    if not store.claim_fire(
        schedule,
        instance_id=instance_id,
        kind=kind,
        status=ScheduleFireStatus.STARTED,
        occurrence_time=occurrence,
        now=now,
    ):
        return _already_fired(schedule, instance_id, occurrence)
    if blocked and policy in (Policy.CANCEL_OTHER, Policy.TERMINATE_OTHER):
        _stop_previous(schedule, policy)
    return _start(schedule, instance_id, occurrence, policy, now, context, Outcome.TRIGGERED)


def drain(
    schedule: ScheduleRecord, *, now: dt.datetime, context: CommandContext | None = None
) -> FireResult | None:
    """Start the oldest buffered occurrence once the run before it has closed."""
    if schedule.status != ScheduleStatus.ACTIVE or schedule.buffered_count == 0:
        return None
    if previous_run_active(schedule):
        return None
    buffered = store.oldest_buffered_fire(schedule)
    if buffered is None:  # the counter drifted; the slots are the truth
        schedule.set(buffered_count=0)
        return None
    schedule.set(buffered_count=schedule.buffered_count - 1)
    store.update_fire(schedule, buffered.instance_id, now=now, status=ScheduleFireStatus.STARTED)
    return _start(
        schedule,
        buffered.instance_id,
        buffered.occurrence_time,
        Policy(schedule.overlap_policy),
        now,
        context,
        Outcome.BUFFER_DRAINED,
    )


def skip(
    schedule: ScheduleRecord,
    reason: str,
    occurrence: dt.datetime | None,
    now: dt.datetime,
    context: CommandContext | None = None,
) -> FireResult:
    """Record a skipped trigger on the schedule and in its audit stream."""
    schedule.set(
        last_skip_reason=reason,
        last_skipped_at=now,
        skipped_trigger_count=schedule.skipped_trigger_count + 1,
    )
    fields = {
        "reason": reason,
        "skipped_trigger_count": schedule.skipped_trigger_count,
        "last_skipped_at": timestamp(now),
    }
    payload = build_payload(ScheduleEventType.TRIGGER_SKIPPED, fields, context)
    store.append_event(schedule, ScheduleEventType.TRIGGER_SKIPPED, payload, now=now)
    return _result(schedule, Outcome.SKIPPED, occurrence, reason=reason)


def retire(
    schedule: ScheduleRecord, reason: str, now: dt.datetime, context: CommandContext | None = None
) -> None:
    """Soft-delete: the row and its audit stream stay; buffered fires are dropped."""
    schedule.set(status=ScheduleStatus.DELETED, deleted_at=now, next_fire_at=None)
    if schedule.buffered_count:
        store.discard_buffered(schedule, reason=SkipReason.STATUS_NOT_TRIGGERABLE, now=now)
        schedule.set(buffered_count=0)
    fields = {"reason": reason, "deleted_at": timestamp(now)}
    payload = build_payload(ScheduleEventType.DELETED, fields, context)
    store.append_event(schedule, ScheduleEventType.DELETED, payload, now=now)


def _buffer(
    schedule: ScheduleRecord, instance_id: str, kind: str, occurrence: dt.datetime, now: dt.datetime
) -> FireResult:
    if not store.claim_fire(
        schedule,
        instance_id=instance_id,
        kind=kind,
        status=ScheduleFireStatus.BUFFERED,
        occurrence_time=occurrence,
        now=now,
    ):
        return _already_fired(schedule, instance_id, occurrence)
    schedule.set(buffered_count=schedule.buffered_count + 1)
    return _result(schedule, Outcome.BUFFERED, occurrence, instance_id=instance_id)


def _stop_previous(schedule: ScheduleRecord, policy: ScheduleOverlapPolicy) -> None:
    assert schedule.latest_instance_id is not None
    reason = f"schedule {schedule.schedule_id!r} fired again ({policy})"
    stop = request_cancel if policy == Policy.CANCEL_OTHER else request_terminate
    stop(
        schedule.latest_instance_id,
        reason=reason,
        source="schedule",
        namespace=schedule.namespace,
    )


def _start(
    schedule: ScheduleRecord,
    instance_id: str,
    occurrence: dt.datetime,
    policy: ScheduleOverlapPolicy,
    now: dt.datetime,
    context: CommandContext | None,
    success: str,
) -> FireResult:
    """Start the fire's run; a start the instance refuses skips the fire."""
    trigger_number = schedule.fires_count + 1
    lineage = {
        "schedule_id": schedule.schedule_id,
        "schedule_ulid": str(schedule.id),
        "cron_expression": schedule.primary_cron(),
        "timezone": schedule.spec.get("timezone", "UTC"),
        "overlap_policy": str(policy),
        "trigger_number": trigger_number,
        "occurrence_time": timestamp(occurrence),
    }
    started = _start_run(schedule, instance_id, lineage)
    if not started.accepted:
        store.update_fire(
            schedule,
            instance_id,
            now=now,
            status=ScheduleFireStatus.SKIPPED,
            skip_reason=SkipReason.INSTANCE_ALREADY_STARTED,
        )
        return skip(schedule, SkipReason.INSTANCE_ALREADY_STARTED, occurrence, now, context)
    run_id = str(started.run_id)
    store.update_fire(schedule, instance_id, now=now, run_id=started.run_id)
    remaining = schedule.remaining_actions
    schedule.set(
        fires_count=trigger_number,
        last_fired_at=now,
        latest_instance_id=instance_id,
        remaining_actions=None if remaining is None else remaining - 1,
    )
    _audit_triggered(schedule, instance_id, started, lineage, now=now, context=context)
    if schedule.remaining_actions == 0:
        retire(schedule, DELETE_REASON_MAX_RUNS, now, context)
    return _result(schedule, success, occurrence, instance_id=instance_id, run_id=run_id)


def _start_run(schedule: ScheduleRecord, instance_id: str, lineage: dict[str, Any]) -> StartOutcome:
    """``start_workflow`` through the interceptors, with the schedule's input, routing and
    visibility, and ``ScheduleTriggered`` after ``WorkflowStarted``."""
    cls = registry.workflow_class(schedule.workflow_type)

    def begin(input: interceptors.StartWorkflowInput) -> StartOutcome:
        return start_workflow(
            instance_id=instance_id,
            workflow_type=schedule.workflow_type,
            workflow_class=schedule.workflow_class,
            arguments=input.args,
            options=dataclasses.replace(input.options, headers=input.headers),
            queue=schedule.queue or getattr(cls, "queue", None),
            connection=schedule.connection or getattr(cls, "connection", None),
            source="schedule",
            command_metadata={"schedule": lineage},
            lineage_events=[("ScheduleTriggered", lineage)],
            namespace=schedule.namespace,  # a schedule's runs live in its namespace
        )

    options = StartOptions(
        labels=dict(schedule.labels),
        memo=dict(schedule.memo),
        search_attributes=dict(schedule.search_attributes),
    )
    started: StartOutcome = interceptors.call(
        "start_workflow",
        interceptors.StartWorkflowInput(
            schedule.workflow_type,
            instance_id,
            schedule.input(),
            options,
            source="schedule",
            schedule=dict(lineage),
        ),
        begin,
    )
    return started


def _audit_triggered(
    schedule: ScheduleRecord,
    instance_id: str,
    started: StartOutcome,
    lineage: dict[str, Any],
    *,
    now: dt.datetime,
    context: CommandContext | None,
) -> None:
    """The fire's ``ScheduleTriggered`` in the schedule's audit stream (``lineage``: what
    the run's own ``ScheduleTriggered`` recorded)."""
    fields = {
        "workflow_instance_id": instance_id,
        "workflow_run_id": str(started.run_id),
        "outcome": started.outcome,
        "effective_overlap_policy": lineage["overlap_policy"],
        "trigger_number": lineage["trigger_number"],
        "occurrence_time": lineage["occurrence_time"],
    }
    payload = build_payload(ScheduleEventType.TRIGGERED, fields, context)
    store.append_event(
        schedule,
        ScheduleEventType.TRIGGERED,
        payload,
        now=now,
        instance_id=instance_id,
        run_id=str(started.run_id),
    )


def _already_fired(
    schedule: ScheduleRecord, instance_id: str, occurrence: dt.datetime
) -> FireResult:
    existing = store.get_fire(schedule, instance_id)
    started = existing is not None and existing.status == ScheduleFireStatus.STARTED
    return _result(
        schedule,
        Outcome.ALREADY_FIRED,
        occurrence,
        instance_id=instance_id if started else None,
        run_id=str(existing.run_id) if started and existing and existing.run_id else None,
    )


def _result(
    schedule: ScheduleRecord, outcome: str, occurrence: dt.datetime | None, **extra: Any
) -> FireResult:
    return FireResult(
        schedule_id=schedule.schedule_id,
        namespace=schedule.namespace,
        outcome=outcome,
        occurrence_time=occurrence,
        last_fired_at=schedule.last_fired_at,
        next_fire_at=schedule.next_fire_at,
        **extra,
    )
