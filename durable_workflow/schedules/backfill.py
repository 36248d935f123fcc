"""Backfill: start the occurrences of a past window, one transaction each."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from durable_workflow import clock
from durable_workflow.executor.common import retry_transaction
from durable_workflow.models.schedules import ScheduleFireKind, ScheduleFireStatus
from durable_workflow.schedules import firing, store
from durable_workflow.schedules.access import locked, refuse_deleted
from durable_workflow.schedules.audit import CommandContext
from durable_workflow.schedules.errors import InvalidScheduleError, ScheduleError
from durable_workflow.schedules.policies import (
    Outcome,
    ScheduleOverlapPolicy,
    ScheduleStatus,
    backfill_policy,
)
from durable_workflow.schedules.records import ScheduleRecord

#: A backfill enumerates at most this many occurrences (a mistyped window fails fast).
MAX_BACKFILL_OCCURRENCES = 10_000


def run_backfill(
    record: ScheduleRecord,
    start: dt.datetime,
    end: dt.datetime,
    *,
    override: ScheduleOverlapPolicy | None,
    context: CommandContext | None,
) -> list[dict[str, Any]]:
    refuse_deleted(record, "backfilled")
    if start.tzinfo is None or end.tzinfo is None:
        raise InvalidScheduleError("backfill bounds must be timezone-aware datetimes")
    policy = backfill_policy(ScheduleOverlapPolicy(record.overlap_policy), override)
    # Canonical times only: jitter belongs to live ticks, never to a backfill.
    window = record.parsed_spec().occurrences(start, min(end, clock.now()))
    occurrences = list(itertools.islice(window, MAX_BACKFILL_OCCURRENCES + 1))
    if len(occurrences) > MAX_BACKFILL_OCCURRENCES:
        raise ScheduleError(
            f"the backfill window holds more than {MAX_BACKFILL_OCCURRENCES} occurrences"
        )
    rows = []
    for occurrence in occurrences:
        result = _backfill_one(record, occurrence, policy, context)
        if result is None:  # max_runs used up (the schedule retired) or deleted meanwhile
            break
        rows.append(
            {
                "schedule_id": record.schedule_id,
                "instance_id": result.instance_id,
                "cron_time": occurrence,
                "outcome": result.outcome,
                "reason": result.reason,
            }
        )
    return rows


@retry_transaction
def _backfill_one(
    schedule: ScheduleRecord,
    occurrence: dt.datetime,
    policy: ScheduleOverlapPolicy,
    context: CommandContext | None,
) -> firing.FireResult | None:
    with locked(schedule) as (record, now):
        if record.status == ScheduleStatus.DELETED or record.remaining_actions == 0:
            return None
        live = store.get_fire(record, firing.instance_id_for(record.schedule_id, occurrence))
        if live is not None and live.status == ScheduleFireStatus.STARTED:
            # A live tick already ran this very occurrence: do not run it twice.
            return firing.FireResult(
                schedule_id=record.schedule_id,
                namespace=record.namespace,
                outcome=Outcome.ALREADY_FIRED,
                occurrence_time=occurrence,
                instance_id=live.instance_id,
                run_id=str(live.run_id) if live.run_id else None,
            )
        return firing.fire(
            record,
            occurrence=occurrence,
            kind=ScheduleFireKind.BACKFILL,
            policy=policy,
            now=now,
            context=context,
        )
