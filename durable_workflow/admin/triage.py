"""The runs list's triage columns: what each run of a page waits on, in words, and the
attention badges.

A page of runs costs a fixed number of queries whatever its size: one per kind
of wait (timers, signal and condition waits, activities, children, updates, the
failed task a run is parked on) and one per attention kind, each over the
page's run ids.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from durable_workflow import clock, queue_limits
from durable_workflow.engine.events import EventType
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityExecution,
    ActivityStatus,
    ChildCall,
    ChildCallStatus,
    HistoryEvent,
    Timer,
    TimerStatus,
    UpdateStatus,
    WorkflowFailure,
    WorkflowRun,
    WorkflowUpdate,
)
from durable_workflow.operations.attention import KINDS, attention_of
from durable_workflow.store import work_queues, workflow_queues

_OPENS = (EventType.SIGNAL_WAIT_OPENED, EventType.CONDITION_WAIT_OPENED)
_CLOSES = (
    EventType.SIGNAL_APPLIED,
    EventType.CONDITION_WAIT_SATISFIED,
    EventType.CONDITION_WAIT_TIMED_OUT,
    EventType.TIMER_FIRED,
)


@dataclasses.dataclass
class Triage:
    """One run of the page: attention kinds, and its waits as (step, words) pairs."""

    attention: list[str] = dataclasses.field(default_factory=list)
    waits: list[tuple[float, str]] = dataclasses.field(default_factory=list)

    @property
    def badges(self) -> list[tuple[str, str, str]]:
        """(kind, badge text, what it means) of each attention kind."""
        return [(key, KINDS[key].badge, KINDS[key].label) for key in self.attention]

    @property
    def waiting_on(self) -> str:
        if not self.waits:
            return ""
        ordered = [words for _, words in sorted(self.waits, key=lambda wait: wait[0])]
        more = len(ordered) - 2
        return ", ".join(ordered[:2]) + (f" (+{more} more)" if more > 0 else "")


def _clock(value: dt.datetime) -> str:
    """``14:05`` today, ``2026-12-04 14:05`` on another day (the site's time zone)."""
    if timezone.is_naive(value):
        return value.strftime("%Y-%m-%d %H:%M")
    local, today = timezone.localtime(value), timezone.localtime(clock.now()).date()
    return local.strftime("%H:%M" if local.date() == today else "%Y-%m-%d %H:%M")


def _attempts(row: ActivityExecution) -> str:
    limit = (row.options or {}).get("max_attempts", 1)
    limit_text = "∞" if limit in (0, None) else str(limit)
    return f"attempt {max(row.attempt_count, 1)}/{limit_text}"


def _timers(ids: list[uuid.UUID], into: dict[uuid.UUID, Triage]) -> None:
    rows = Timer.objects.filter(run_id__in=ids, status=TimerStatus.PENDING)
    for run_id, step, fire_at, kind in rows.values_list(
        "run_id", "sequence", "fire_at", "timer_kind"
    ):
        if not kind:  # not the timeout of a signal or condition wait
            into[run_id].waits.append((step, f"timer until {_clock(fire_at)}"))


def _message_waits(ids: list[uuid.UUID], into: dict[uuid.UUID, Triage]) -> None:
    events = HistoryEvent.objects.filter(run_id__in=ids, event_type__in=_OPENS + _CLOSES)
    opened: dict[uuid.UUID, list[dict[str, Any]]] = defaultdict(list)
    closed: dict[uuid.UUID, set[Any]] = defaultdict(set)
    for run_id, event_type, payload in events.values_list("run_id", "event_type", "payload"):
        if not isinstance(payload, dict):
            continue
        if event_type in _OPENS:
            opened[run_id].append({**payload, "_signal": event_type == _OPENS[0]})
        else:
            closed[run_id].add(payload.get("sequence"))
    for run_id, waits in opened.items():
        for payload in waits:
            step = payload.get("sequence")
            if not isinstance(step, int) or step in closed[run_id]:
                continue
            if payload["_signal"]:
                words = f'signal "{payload.get("signal_name") or ""}"'
            else:
                words = f"condition {payload.get('condition_key') or ''}".rstrip()
            into[run_id].waits.append((step, words))


def _activities(ids: list[uuid.UUID], into: dict[uuid.UUID, Triage]) -> None:
    rows = ActivityExecution.objects.filter(
        run_id__in=ids, status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    ).only("run_id", "sequence", "activity_type", "attempt_count", "options")
    queued = work_queues.waits_of_runs(ids)
    for row in rows:
        words = f"activity {row.activity_type} {_attempts(row)}"
        wait = queued.get((row.run_id, row.id))
        if wait is not None:
            words += ", " + queue_limits.waiting_words(wait[0], queue_limits.REASONS[wait[1]])
        into[row.run_id].waits.append((row.sequence, words))


def _children_and_updates(ids: list[uuid.UUID], into: dict[uuid.UUID, Triage]) -> None:
    children = ChildCall.objects.filter(
        parent_run_id__in=ids, status__in=(ChildCallStatus.SCHEDULED, ChildCallStatus.STARTED)
    ).values_list("parent_run_id", "sequence", "child_instance_id")
    for run_id, step, child in children:
        into[run_id].waits.append((step, f"child {child}"))
    updates = WorkflowUpdate.objects.filter(run_id__in=ids, status=UpdateStatus.ACCEPTED)
    for run_id, name in updates.values_list("run_id", "update_name"):
        if run_id is not None:
            into[run_id].waits.append((float("inf"), f"update {name}"))


def _failed_tasks(ids: list[uuid.UUID], into: dict[uuid.UUID, Triage]) -> None:
    """A parked run waits on nothing else: its failed task comes first."""
    rows = (
        WorkflowFailure.objects.filter(run_id__in=ids, source_kind="workflow_task")
        .order_by("run_id", "-created_at")
        .values_list("run_id", "exception_type")
    )
    seen: set[uuid.UUID] = set()
    for run_id, exception_type in rows:
        if run_id in seen:
            continue
        seen.add(run_id)
        short = exception_type.rsplit(".", 1)[-1]
        into[run_id].waits.insert(0, (float("-inf"), f"failed task: {short}"))


def triage(runs: Iterable[WorkflowRun]) -> dict[uuid.UUID, Triage]:
    """Attention kinds and waits of each open run of ``runs`` (closed runs get none)."""
    found = {run.pk: Triage() for run in runs}
    ids = [run.pk for run in runs if run.status not in TERMINAL_RUN_STATUSES]
    if not ids:
        return found
    for run_id, kinds in attention_of(ids).items():
        found[run_id].attention = kinds
    for run_id, queue in workflow_queues.waiting_of_runs(ids).items():
        found[run_id].waits.append((0, f'waiting for a slot on workflow queue "{queue}"'))
    _timers(ids, found)
    _message_waits(ids, found)
    _activities(ids, found)
    _children_and_updates(ids, found)
    parked = [run_id for run_id in ids if "parked" in found[run_id].attention]
    if parked:
        _failed_tasks(parked, found)
    return found
