"""Message streams on the executor side: storing sends, delivering to targets, cursors."""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.authoring.streams import check_message
from durable_workflow.engine import commands as c
from durable_workflow.engine.events import EventType
from durable_workflow.executor.common import wake_for_news
from durable_workflow.store import database, runs, streams
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def send(
    *,
    target_instance_id: str,
    stream_key: str,
    message: dict[str, Any],
    namespace: str,
    now: dt.datetime,
) -> dict[str, Any]:
    """Store a message for ``target_instance_id`` and wake its current run."""
    stored, created = streams.store_message(
        namespace=namespace,
        target_instance_id=target_instance_id,
        stream_key=stream_key,
        message=message,
        now=now,
    )
    if created:
        target = runs.current_run(target_instance_id, namespace=namespace)
        if target is not None:
            wake_for_news(target.id, now=now)
    return stored


def send_from_workflow(run: RunRecord, command: c.SendMessage, *, now: dt.datetime) -> list[Event]:
    message = {
        **command.message,
        "sender_instance_id": run.instance_id,
        "sender_run_id": run.id,
    }
    stored = send(
        target_instance_id=str(message.pop("target_instance_id")),
        stream_key=command.stream_key,
        message=message,
        namespace=run.namespace,
        now=now,
    )
    payload = {
        "sequence": command.step,
        "stream_key": command.stream_key,
        "message_id": stored["message_id"],
        "message_sequence": stored["message_sequence"],
        "idempotency_key": stored["idempotency_key"],
    }
    return [(EventType.MESSAGE_SENT, payload)]


def advance_cursor(run: RunRecord, command: c.AdvanceCursor, *, now: dt.datetime) -> list[Event]:
    streams.mark_consumed(command.message_ids, run.id, now=now)
    payload = {
        "sequence": command.step,
        "stream_key": command.stream_key,
        "cursor": command.cursor,
        "message_ids": command.message_ids,
    }
    return [(EventType.MESSAGE_CURSOR_ADVANCED, payload)]


def deliver_pending(run: RunRecord) -> list[Event]:
    """MessageReceived events for messages sent to this instance but not yet in history."""
    pending = streams.undelivered(run.instance_id, namespace=run.namespace)
    streams.mark_delivered([m["message_id"] for m in pending], run.id)
    return [(EventType.MESSAGE_RECEIVED, message) for message in pending]


def external_send(
    instance_id: str, stream_key: str, message: dict[str, Any], *, namespace: str | None = None
) -> dict[str, Any]:
    """Send from application code (not from a workflow)."""

    check_message(stream_key, message)
    space = namespaces.resolve(namespace)

    with database.atomic():
        return send(
            target_instance_id=instance_id,
            stream_key=stream_key,
            message={"channel": "external", **message},
            namespace=space,
            now=clock.now(),
        )
