"""Message rows for message streams."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.db import IntegrityError
from django.db.models import Max

from durable_workflow.ids import uuid7
from durable_workflow.models import WorkflowMessage
from durable_workflow.store import database


def _payload(row: WorkflowMessage) -> dict[str, Any]:
    return {
        "message_id": str(row.id),
        "stream_key": row.stream_key,
        "message_sequence": row.sequence,
        "channel": row.channel,
        "sender_instance_id": row.sender_instance_id,
        "payload_reference": row.payload_reference,
        "correlation_id": row.correlation_id,
        "idempotency_key": row.idempotency_key,
        "metadata": row.metadata,
    }


def store_message(
    *,
    namespace: str,
    target_instance_id: str,
    stream_key: str,
    message: dict[str, Any],
    now: dt.datetime,
) -> tuple[dict[str, Any], bool]:
    """Store a message at the stream's next sequence; (message, created).

    A repeated idempotency key returns the stored message and creates nothing.
    """
    key = message.get("idempotency_key")
    if key:
        existing = WorkflowMessage.objects.filter(
            namespace=namespace,
            target_instance_id=target_instance_id,
            stream_key=stream_key,
            idempotency_key=key,
        ).first()
        if existing is not None:
            return _payload(existing), False
    for _ in range(5):
        last = WorkflowMessage.objects.filter(
            namespace=namespace, target_instance_id=target_instance_id, stream_key=stream_key
        ).aggregate(top=Max("sequence"))["top"]
        try:
            with database.atomic():
                row = WorkflowMessage.objects.create(
                    id=uuid7(),
                    namespace=namespace,
                    target_instance_id=target_instance_id,
                    stream_key=stream_key,
                    sequence=(last or 0) + 1,
                    channel=message.get("channel") or "workflow_message",
                    sender_instance_id=message.get("sender_instance_id") or "",
                    sender_run_id=message.get("sender_run_id"),
                    payload_reference=message.get("payload_reference") or "",
                    correlation_id=message.get("correlation_id") or "",
                    idempotency_key=key,
                    metadata=message.get("metadata") or {},
                    expires_at=message.get("expires_at"),
                    created_at=now,
                )
            return _payload(row), True
        except IntegrityError:  # a concurrent sender took the sequence: try the next one
            continue
    raise RuntimeError("could not allocate a message sequence")


def undelivered(instance_id: str, *, namespace: str) -> list[dict[str, Any]]:
    rows = WorkflowMessage.objects.filter(
        namespace=namespace,
        target_instance_id=instance_id,
        target_run__isnull=True,
        status="pending",
    ).order_by("stream_key", "sequence")
    return [_payload(r) for r in rows]


def mark_delivered(message_ids: list[str], run_id: uuid.UUID) -> None:
    WorkflowMessage.objects.filter(id__in=message_ids).update(target_run_id=run_id)


def mark_consumed(message_ids: list[str], run_id: uuid.UUID, *, now: dt.datetime) -> None:
    WorkflowMessage.objects.filter(id__in=message_ids).update(
        status="consumed", consumed_by_run_id=run_id, consumed_at=now
    )
