"""A run's history as a readable, paginated timeline.

Pages are cut by sequence (keyset pagination: ``after`` / ``before``), so the
cost of a page does not depend on how long the history is. Each page runs a
fixed number of queries: the events, the event before them (for the first
duration), the failures they reference, and two existence probes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from durable_workflow.admin.payloads import duration, pretty
from durable_workflow.engine.events import (
    COMMAND_EVENTS,
    MESSAGE_EVENTS,
    RESOLUTION_EVENTS,
    TERMINAL_EVENTS,
)
from durable_workflow.models import HistoryEvent, WorkflowFailure, WorkflowRun

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


@dataclasses.dataclass(frozen=True)
class Row:
    sequence: int
    event_type: str
    recorded_at: dt.datetime
    step: int | None
    kind: str
    since_previous: str
    since_start: str
    payload: str
    failure: WorkflowFailure | None


@dataclasses.dataclass(frozen=True)
class Page:
    rows: list[Row]
    total: int
    size: int
    event_type: str | None
    first_sequence: int | None
    last_sequence: int | None
    has_previous: bool
    has_next: bool


def _kind(event_type: str, payload: dict[str, Any]) -> str:
    if "failure_id" in payload or event_type.endswith(("Failed", "TimedOut")):
        return "failure"
    if event_type in TERMINAL_EVENTS:
        return "close"
    if event_type in COMMAND_EVENTS:
        return "command"
    if event_type in RESOLUTION_EVENTS or event_type in MESSAGE_EVENTS:
        return "input"
    return "fact"


def _seconds(later: dt.datetime, earlier: dt.datetime | None) -> float | None:
    return (later - earlier).total_seconds() if earlier else None


def build_page(
    run: WorkflowRun,
    *,
    after: int | None = None,
    before: int | None = None,
    event_type: str | None = None,
    size: int = PAGE_SIZE,
) -> Page:
    size = max(1, min(size, MAX_PAGE_SIZE))
    events = HistoryEvent.objects.filter(run_id=run.id)
    if event_type:
        events = events.filter(event_type=event_type)
    columns = ("sequence", "event_type", "payload", "recorded_at")
    if before is not None:
        fetched = list(
            events.filter(sequence__lt=before)
            .order_by("-sequence")
            .values_list(*columns)[: size + 1]
        )
        fetched = fetched[:size][::-1]
    else:
        fetched = list(
            events.filter(sequence__gt=after or 0)
            .order_by("sequence")
            .values_list(*columns)[: size + 1]
        )[:size]
    first = fetched[0][0] if fetched else None
    last = fetched[-1][0] if fetched else None
    has_previous = first is not None and events.filter(sequence__lt=first).exists()
    has_next = last is not None and events.filter(sequence__gt=last).exists()
    previous_at = None
    if first is not None:
        previous_at = (
            HistoryEvent.objects.filter(run_id=run.id, sequence__lt=first)
            .order_by("-sequence")
            .values_list("recorded_at", flat=True)
            .first()
        )
    failure_ids = [
        p["failure_id"] for _, _, p, _ in fetched if isinstance(p, dict) and p.get("failure_id")
    ]
    failures = (
        {str(f.id): f for f in WorkflowFailure.objects.filter(id__in=failure_ids)}
        if failure_ids
        else {}
    )
    start = run.started_at or run.created_at
    rows = []
    for sequence, kind, payload, recorded_at in fetched:
        payload = payload if isinstance(payload, dict) else {"value": payload}
        step = payload.get("sequence")
        rows.append(
            Row(
                sequence=sequence,
                event_type=kind,
                recorded_at=recorded_at,
                step=int(step) if isinstance(step, int) else None,
                kind=_kind(kind, payload),
                since_previous=duration(_seconds(recorded_at, previous_at)),
                since_start=duration(_seconds(recorded_at, start)),
                payload=pretty(payload),
                failure=failures.get(str(payload.get("failure_id"))),
            )
        )
        previous_at = recorded_at
    return Page(
        rows=rows,
        total=run.history_event_count,
        size=size,
        event_type=event_type or None,
        first_sequence=first,
        last_sequence=last,
        has_previous=has_previous,
        has_next=has_next,
    )
