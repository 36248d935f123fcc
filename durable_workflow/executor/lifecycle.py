"""Appending history and announcing lifecycle signals once it is committed."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from durable_workflow.engine.events import HistoryEvent
from durable_workflow.signals import SIGNAL_OF_EVENT, SIGNAL_OF_FACT, LifecycleEvent
from durable_workflow.store import history
from durable_workflow.store.records import RunRecord

logger = logging.getLogger("durable_workflow")


def append(
    run: RunRecord, events: Sequence[tuple[str, dict[str, Any]]], *, now: dt.datetime
) -> list[HistoryEvent]:
    """``store.history.append_events`` plus a lifecycle signal per announced event."""
    appended = history.append_events(run, events, now=now)
    for kind, payload in events:
        signal = SIGNAL_OF_EVENT.get(kind)
        if signal is not None and signal.has_listeners():
            event = _event(run, kind, payload)
            transaction.on_commit(
                lambda signal=signal, event=event: _send(signal, event), robust=True
            )
    return appended


def announce(run: RunRecord, kind: str, payload: dict[str, Any]) -> None:
    """A lifecycle signal for a fact that is not a history event, sent on commit."""
    signal = SIGNAL_OF_FACT[kind]
    if signal.has_listeners():
        event = _event(run, kind, payload)
        transaction.on_commit(lambda: _send(signal, event), robust=True)


def _send(signal: Any, event: LifecycleEvent) -> None:
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
