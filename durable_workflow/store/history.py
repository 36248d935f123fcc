"""The append-only history log."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from durable_workflow.engine.events import EventType
from durable_workflow.engine.events import HistoryEvent as Event
from durable_workflow.models import HistoryEvent
from durable_workflow.store import sql
from durable_workflow.store.records import RunRecord

_EVENTS = sql.Table(HistoryEvent)
_COLUMNS = ("sequence", "event_type", "payload", "recorded_at")


def load_history(
    run_id: uuid.UUID | str, *, after_sequence: int = 0, up_to: int | None = None
) -> list[Event]:
    """The run's events in order, in one query (optionally only a window of sequences)."""
    statement = history_statement(run_id, after_sequence=after_sequence, up_to=up_to)
    events: list[Event] = sql.together(HistoryEvent, [statement])[0]
    return events


def history_statement(
    run_id: uuid.UUID | str, *, after_sequence: int = 0, up_to: int | None = None
) -> sql.Statement[list[Event]]:
    """:func:`load_history` as a statement for ``sql.together`` (outcome: the events)."""
    where: list[sql.Condition] = [("run_id", "=", run_id)]
    if after_sequence:
        where.append(("sequence", ">", after_sequence))
    if up_to is not None:
        where.append(("sequence", "<=", up_to))
    return _as_events(_EVENTS.select_columns_statement(_COLUMNS, where, order_by="sequence"))


def tail_statement(
    run_id: sql.Statement[Any], after: sql.Statement[Any]
) -> sql.Statement[list[Event]]:
    """:func:`history_statement` for a run and a sequence given as subqueries: the
    events of the run selected by ``run_id`` after the sequence ``after`` selects."""
    where = [("run_id", "IN SELECT", run_id), ("sequence", "> SELECT", after)]
    return _as_events(_EVENTS.select_columns_statement(_COLUMNS, where, order_by="sequence"))


def _as_events(read: sql.Statement[list[list[Any]]]) -> sql.Statement[list[Event]]:
    # Read a column at a time: a cold replay reads every event of the run, and the
    # per-row conversions cost more than the replay itself.
    return read.then(lambda columns: list(map(Event, *columns)))


def append_events(
    run: RunRecord, events: Sequence[tuple[str, dict[str, Any]]], *, now: dt.datetime
) -> list[Event]:
    """Insert events at the run's next sequences; the caller holds the run lock.

    The unique (run, sequence) constraint turns any race that slipped past the
    lock into an IntegrityError instead of a duplicated history.
    """
    if not events:
        return []
    rows, appended, size = [], [], 0
    sequence = run.next_sequence
    for kind, payload in events:
        rows.append(
            {
                "run_id": run.id,
                "sequence": sequence,
                "event_type": kind,
                "payload": payload,
                "recorded_at": now,
            }
        )
        appended.append(Event(sequence=sequence, event_type=kind, payload=payload, recorded_at=now))
        text = json.dumps(payload, separators=(",", ":"))
        size += len(text)
        # What reading the row back would give (JSON values, not the caller's objects).
        run.appended.append(
            Event(sequence=sequence, event_type=kind, payload=json.loads(text), recorded_at=now)
        )
        sequence += 1
    _EVENTS.insert(rows, defer=True)
    run.set(next_sequence=sequence, history_size_bytes=run.history_size_bytes + size)
    return appended


def copy_events(run: RunRecord, events: Sequence[Event]) -> None:
    """Insert ``events`` (another run's, as a reset keeps them) at the run's next
    sequences, each with its own ``recorded_at``: replay's clock reads the time an
    event was recorded, so the new run replays the same times the old one did."""
    if not events:
        return
    rows, size, sequence = [], 0, run.next_sequence
    for event in events:
        rows.append(
            {
                "run_id": run.id,
                "sequence": sequence,
                "event_type": event.event_type,
                "payload": event.payload,
                "recorded_at": event.recorded_at,
            }
        )
        size += len(json.dumps(event.payload, separators=(",", ":")))
        sequence += 1
    _EVENTS.insert(rows, defer=True)
    run.set(next_sequence=sequence, history_size_bytes=run.history_size_bytes + size)


def activity_results(
    run_id: uuid.UUID, execution_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    """The results of those of the run's activity executions that completed, read from
    their ``ActivityCompleted`` events in one statement (the (run, event type) index).

    The history is where a result is kept; execution rows closed before it stopped
    being copied onto them still carry one, so readers prefer the row when it has it.
    """
    wanted = {str(execution_id): execution_id for execution_id in execution_ids}
    if not wanted:
        return {}
    rows = HistoryEvent.objects.filter(
        run_id=run_id,
        event_type=EventType.ACTIVITY_COMPLETED,
        payload__activity_execution_id__in=list(wanted),
    ).values_list("payload__activity_execution_id", "payload__result")
    return {wanted[key]: result for key, result in rows if key in wanted}
