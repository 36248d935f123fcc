"""``ScheduleManager``: define, change and fire schedules.

Each method is one transaction on the schedule row (a backfill is one per
occurrence) and appends its audit event in that same transaction.
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from durable_workflow import clock, namespaces, text
from durable_workflow.client_async import class_twin
from durable_workflow.models.schedules import ScheduleFireKind
from durable_workflow.schedules import firing, listing, store, ticker
from durable_workflow.schedules.access import (
    ScheduleRef,
    default_namespace,
    load,
    locked,
    refuse_deleted,
)
from durable_workflow.schedules.actions import Action, action_from_dict, build_action
from durable_workflow.schedules.audit import CommandContext, ScheduleEventType, build_payload
from durable_workflow.schedules.audit import timestamp as ts
from durable_workflow.schedules.backfill import run_backfill
from durable_workflow.schedules.errors import InvalidScheduleError
from durable_workflow.schedules.policies import (
    DELETE_REASON_EXPLICIT,
    Outcome,
    ScheduleOverlapPolicy,
    ScheduleStatus,
    SkipReason,
)
from durable_workflow.schedules.records import (
    ScheduleDescription,
    ScheduleEvent,
    SchedulePage,
    ScheduleRecord,
)
from durable_workflow.schedules.specs import ScheduleSpec
from durable_workflow.schedules.updates import (
    apply_changes,
    plain_fields,
    require_count,
    require_policy,
)
from durable_workflow.store import database

_SCHEDULE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


class ScheduleManager:
    """Class-level API; every method takes a schedule id (or a description) first."""

    # ------------------------------------------------------------ definition
    @classmethod
    def create(
        cls,
        *,
        schedule_id: str,
        workflow: type | str,
        cron_expression: str,
        arguments: list[Any] | dict[str, Any] | None = None,
        timezone: str = "UTC",
        overlap_policy: ScheduleOverlapPolicy | str = ScheduleOverlapPolicy.SKIP,
        labels: dict[str, str] | None = None,
        memo: dict[str, Any] | None = None,
        search_attributes: dict[str, Any] | None = None,
        jitter_seconds: int = 0,
        max_runs: int | None = None,
        connection: str | None = None,
        queue: str | None = None,
        notes: str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> ScheduleDescription:
        """A schedule that starts ``workflow(*arguments)`` on a 5-field cron expression."""
        spec = {"cron_expressions": [cron_expression], "timezone": timezone}
        return cls._create(
            schedule_id,
            spec,
            build_action(workflow, arguments),
            overlap_policy=overlap_policy,
            labels=labels,
            memo=memo,
            search_attributes=search_attributes,
            jitter_seconds=jitter_seconds,
            max_runs=max_runs,
            connection=connection,
            queue=queue,
            notes=notes,
            namespace=namespace,
            context=context,
        )

    @classmethod
    def create_from_spec(
        cls, /, *, schedule_id: str, spec: dict[str, Any], action: dict[str, Any], **options: Any
    ) -> ScheduleDescription:
        """A schedule from cron expressions and/or intervals; ``action`` names the workflow.

        ``options`` are the keyword arguments of ``create`` after ``timezone``.
        """
        return cls._create(schedule_id, spec, action_from_dict(action), **options)

    @classmethod
    def _create(
        cls,
        schedule_id: str,
        spec: dict[str, Any],
        action: Action,
        *,
        overlap_policy: ScheduleOverlapPolicy | str = ScheduleOverlapPolicy.SKIP,
        labels: dict[str, str] | None = None,
        memo: dict[str, Any] | None = None,
        search_attributes: dict[str, Any] | None = None,
        jitter_seconds: int = 0,
        max_runs: int | None = None,
        connection: str | None = None,
        queue: str | None = None,
        notes: str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> ScheduleDescription:
        if not isinstance(schedule_id, str) or not _SCHEDULE_ID.fullmatch(schedule_id):
            raise InvalidScheduleError(
                f"schedule id {schedule_id!r} must be 1-128 letters, digits, '.', '_' or '-'"
            )
        parsed = ScheduleSpec.parse(spec)
        now = clock.now()
        values = {
            "namespace": namespaces.resolve(namespace, max_length=64),  # its column's width
            "schedule_id": schedule_id,
            "spec": parsed.as_dict(),
            "workflow_type": action.workflow_type,
            "workflow_class": action.workflow_class,
            "arguments": action.arguments,
            "overlap_policy": require_policy(overlap_policy),
            "jitter_seconds": require_count("jitter_seconds", jitter_seconds, minimum=0),
            "max_runs": None
            if max_runs is None
            else require_count("max_runs", max_runs, minimum=1),
            "remaining_actions": max_runs,
            **plain_fields(
                {
                    "connection": connection,
                    "queue": queue,
                    "labels": labels,
                    "memo": memo,
                    "search_attributes": search_attributes,
                    "notes": notes,
                }
            ),
        }
        with database.atomic():
            record = store.insert_schedule(now=now, **values)
            record.set(next_fire_at=firing.next_fire_time(record, after=now))
            _audit(
                record,
                ScheduleEventType.CREATED,
                {
                    "spec": record.spec,
                    "action": record.action(),
                    "overlap_policy": record.overlap_policy,
                    "next_fire_at": ts(record.next_fire_at),
                },
                now,
                context,
            )
            store.save(record, now=now)
        return ScheduleDescription.of(record)

    # ------------------------------------------------------------- lifecycle
    @classmethod
    def pause(
        cls,
        schedule: ScheduleRef,
        *,
        reason: str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> ScheduleDescription:
        """Stop firing (a no-op on a paused schedule)."""
        text.check_reason(reason)
        with locked(schedule, namespace) as (record, now):
            refuse_deleted(record, "paused")
            if record.status == ScheduleStatus.ACTIVE:
                record.set(status=ScheduleStatus.PAUSED, paused_at=now)
                fields = {"reason": reason, "paused_at": ts(now)}
                _audit(record, ScheduleEventType.PAUSED, fields, now, context)
        return ScheduleDescription.of(record)

    @classmethod
    def resume(
        cls,
        schedule: ScheduleRef,
        *,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> ScheduleDescription:
        """Fire again; the next fire time is computed from now (a no-op when active)."""
        with locked(schedule, namespace) as (record, now):
            refuse_deleted(record, "resumed")
            if record.status == ScheduleStatus.PAUSED:
                next_fire_at = firing.next_fire_time(record, after=now)
                record.set(status=ScheduleStatus.ACTIVE, paused_at=None, next_fire_at=next_fire_at)
                fields = {"next_fire_at": ts(next_fire_at)}
                _audit(record, ScheduleEventType.RESUMED, fields, now, context)
        return ScheduleDescription.of(record)

    @classmethod
    def update(
        cls,
        /,
        schedule: ScheduleRef,
        *,
        namespace: str | None = None,
        context: CommandContext | None = None,
        **changes: Any,
    ) -> ScheduleDescription:
        """Change the definition; a new spec or jitter recomputes the next fire time.

        Accepts ``cron_expression``, ``timezone``, ``spec``, ``workflow``,
        ``arguments``, ``overlap_policy``, ``jitter_seconds``, ``max_runs`` (a
        fresh budget), ``labels``, ``memo``, ``search_attributes``,
        ``connection``, ``queue`` and ``notes``.
        """
        with locked(schedule, namespace) as (record, now):
            refuse_deleted(record, "updated")
            changed, reschedule = apply_changes(record, changes)
            if reschedule:
                record.set(next_fire_at=firing.next_fire_time(record, after=now))
            if changed:
                fields = {
                    "changed_fields": changed,
                    "spec": record.spec,
                    "action": record.action(),
                    "overlap_policy": record.overlap_policy,
                    "next_fire_at": ts(record.next_fire_at),
                }
                _audit(record, ScheduleEventType.UPDATED, fields, now, context)
        return ScheduleDescription.of(record)

    @classmethod
    def delete(
        cls,
        schedule: ScheduleRef,
        *,
        reason: str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> ScheduleDescription:
        """Soft-delete: the row stays with status ``deleted``, its audit stream stays too."""
        text.check_reason(reason)
        with locked(schedule, namespace) as (record, now):
            refuse_deleted(record, "deleted")
            firing.retire(record, reason or DELETE_REASON_EXPLICIT, now, context)
        return ScheduleDescription.of(record)

    # --------------------------------------------------------------- reading
    @classmethod
    def describe(
        cls, schedule: ScheduleRef, *, namespace: str | None = None
    ) -> ScheduleDescription:
        return ScheduleDescription.of(load(schedule, namespace))

    @classmethod
    def find_by_schedule_id(
        cls, schedule_id: str, *, namespace: str | None = None
    ) -> ScheduleDescription | None:
        record = store.find(namespace or default_namespace(), schedule_id)
        return ScheduleDescription.of(record) if record else None

    @classmethod
    def list(
        cls,
        *,
        namespace: str | None = None,
        status: ScheduleStatus | str | Iterable[ScheduleStatus | str] | None = None,
        workflow: type | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SchedulePage:
        """One page of the namespace's schedules, ordered by schedule id.

        ``status``: one status or several (default: ``active`` and ``paused``; pass
        ``"deleted"`` for deleted ones). ``workflow``: only schedules starting that
        workflow (a class or type key). ``limit``: 1 to 500. ``cursor``: the previous
        page's ``next_cursor``.
        """
        statuses = listing.statuses(status)
        page_size = require_count("limit", limit, minimum=1)
        if page_size > listing.MAX_PAGE:
            raise InvalidScheduleError(f"limit may be at most {listing.MAX_PAGE}, got {limit}")
        records = store.page(
            namespace=namespace or default_namespace(),
            statuses=statuses,
            workflow_type=None if workflow is None else listing.workflow_type(workflow),
            after=listing.read_cursor(cursor),
            limit=page_size + 1,
        )
        more = len(records) > page_size
        records = records[:page_size]
        last = records[-1] if more else None
        return SchedulePage(
            schedules=[ScheduleDescription.of(record) for record in records],
            next_cursor=listing.make_cursor(last.schedule_id, last.id) if last else None,
        )

    @classmethod
    def history(
        cls,
        schedule: ScheduleRef,
        *,
        after_sequence: int = 0,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> builtins.list[ScheduleEvent]:
        """The schedule's audit stream in sequence order (kept after deletion)."""
        return store.load_events(
            load(schedule, namespace).id, after_sequence=after_sequence, limit=limit
        )

    # ---------------------------------------------------------------- firing
    @classmethod
    def trigger(
        cls,
        schedule: ScheduleRef,
        *,
        overlap_policy: ScheduleOverlapPolicy | str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> str | None:
        """Fire now; the started instance id, or None when skipped (or buffered)."""
        with locked(schedule, namespace) as (record, now):
            if record.remaining_actions == 0:
                firing.skip(record, SkipReason.REMAINING_ACTIONS_EXHAUSTED, now, now, context)
                return None
            if record.status != ScheduleStatus.ACTIVE:
                firing.skip(record, SkipReason.STATUS_NOT_TRIGGERABLE, now, now, context)
                return None
            firing.drain(record, now=now, context=context)
            result = firing.fire(
                record,
                occurrence=now,
                kind=ScheduleFireKind.MANUAL,
                policy=require_policy(overlap_policy or record.overlap_policy),
                now=now,
                context=context,
            )
        return result.instance_id if result.outcome == Outcome.TRIGGERED else None

    @classmethod
    def tick(cls, *, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        """Fire every due schedule once and drain ready buffers; one row per action."""
        return ticker.tick(limit=limit).results

    @classmethod
    def backfill(
        cls,
        schedule: ScheduleRef,
        from_: dt.datetime,
        to: dt.datetime,
        *,
        overlap_policy_override: ScheduleOverlapPolicy | str | None = None,
        namespace: str | None = None,
        context: CommandContext | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Start the canonical (unjittered) occurrences in ``[from_, to]``, oldest first.

        Buffer policies act as ``allow_all``; ``to`` is capped at now; the run
        stops when ``max_runs`` is used up. A re-run of the same window reports
        ``already_fired`` for the occurrences it already handled.
        """
        override = overlap_policy_override
        return run_backfill(
            load(schedule, namespace),
            from_,
            to,
            override=None if override is None else require_policy(override),
            context=context,
        )

    # ------------------------------------------------ awaitable twins (client_async)
    acreate = class_twin(create)
    acreate_from_spec = class_twin(create_from_spec)
    apause = class_twin(pause)
    aresume = class_twin(resume)
    aupdate = class_twin(update)
    adelete = class_twin(delete)
    adescribe = class_twin(describe)
    afind_by_schedule_id = class_twin(find_by_schedule_id)
    alist = class_twin(list)
    ahistory = class_twin(history)
    atrigger = class_twin(trigger)
    atick = class_twin(tick)
    abackfill = class_twin(backfill)


def _audit(
    record: ScheduleRecord,
    event_type: ScheduleEventType,
    fields: dict[str, Any],
    now: dt.datetime,
    context: CommandContext | None,
) -> None:
    store.append_event(record, event_type, build_payload(event_type, fields, context), now=now)
