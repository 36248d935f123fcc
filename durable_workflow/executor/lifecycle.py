"""Appending history and announcing lifecycle signals once it is committed."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Sequence
from typing import Any

from durable_workflow import observe
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.logs import get_logger
from durable_workflow.signals import (
    SIGNAL_OF_EVENT,
    SIGNAL_OF_FACT,
    FailureRecordedEvent,
    LifecycleEvent,
    failure_recorded,
)
from durable_workflow.store import commands, database, history
from durable_workflow.store.records import RunRecord

logger = get_logger("durable_workflow")


def append(
    run: RunRecord, events: Sequence[tuple[str, dict[str, Any]]], *, now: dt.datetime
) -> list[HistoryEvent]:
    """``store.history.append_events`` plus a lifecycle signal per announced event."""
    appended = history.append_events(run, events, now=now)
    observe.history_appended(run, events)
    for kind, payload in events:
        signal = SIGNAL_OF_EVENT.get(kind)
        if signal is not None and signal.has_listeners():
            event = _event(run, kind, payload)
            database.on_commit(functools.partial(_send, signal, event), robust=True)
    return appended


def announce(run: RunRecord, kind: str, payload: dict[str, Any]) -> None:
    """A lifecycle signal for a fact that is not a history event, sent on commit."""
    signal = SIGNAL_OF_FACT[kind]
    if signal.has_listeners():
        event = _event(run, kind, payload)
        database.on_commit(lambda: _send(signal, event), robust=True)


def record_failure(run: RunRecord, **fields: Any) -> uuid.UUID:
    """``store.commands.record_failure`` for ``run``, announced by ``failure_recorded``
    once it commits. Every failure row is written through here (or ``record_failure_of``)."""
    failure_id = commands.record_failure(run_id=run.id, **fields)
    if failure_recorded.has_listeners():
        event = FailureRecordedEvent(
            failure_id=str(failure_id),
            source_kind=fields["source_kind"],
            source_id=fields["source_id"],
            failure_category=fields["failure_category"],
            exception_type=fields["exception_type"],
            exception_class=fields["exception_class"],
            message=fields["message"],
            instance_id=run.instance_id,
            run_id=str(run.id),
            workflow_type=run.workflow_type,
            workflow_class=run.workflow_class,
            committed_at=dt.datetime.now(dt.UTC),
        )
        database.on_commit(lambda: _send(failure_recorded, event), robust=True)
    return failure_id


def record_failure_of(
    info: FailureInfo,
    run: RunRecord,
    *,
    source_kind: str,
    source_id: str,
    now: dt.datetime,
    category: str | None = None,
    non_retryable: bool | None = None,
    details: dict[str, Any] | None = None,
) -> uuid.UUID:
    """:func:`record_failure` for a described exception; ``category``,
    ``non_retryable`` and ``details`` override what ``info`` says."""
    return record_failure(
        run,
        source_kind=source_kind,
        source_id=source_id,
        failure_category=info.category if category is None else category,
        exception_type=info.exception_type,
        exception_class=info.exception_class,
        message=info.message,
        traceback=info.traceback,
        non_retryable=info.non_retryable if non_retryable is None else non_retryable,
        details=info.details if details is None else details,
        now=now,
    )


def _send(signal: Any, event: LifecycleEvent | FailureRecordedEvent) -> None:
    signal.send_robust(sender=event.workflow_type, event=event)


def _event(run: RunRecord, kind: str, payload: dict[str, Any]) -> LifecycleEvent:
    return LifecycleEvent(
        event_type=kind,
        instance_id=run.instance_id,
        run_id=str(run.id),
        workflow_type=run.workflow_type,
        workflow_class=run.workflow_class,
        committed_at=dt.datetime.now(dt.UTC),
        sequence=payload.get("sequence"),
        activity_execution_id=payload.get("activity_execution_id"),
        activity_type=payload.get("activity_type"),
        activity_class=payload.get("activity_class"),
        attempt_number=payload.get("attempt_number"),
        exception_class=payload.get("exception_class"),
        message=payload.get("message"),
        reason=payload.get("reason"),
    )
