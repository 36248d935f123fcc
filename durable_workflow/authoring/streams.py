"""``MessageStream``: the workflow-side inbox/outbox API (``self.inbox("key")``)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from durable_workflow import text
from durable_workflow.ids import validate_instance_id

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import WorkflowRuntime

DEFAULT_STREAM = "default"


def check_message(stream_key: str, message: dict[str, Any]) -> None:
    """Refuse, before anything is written, a stream key or message field no column takes."""
    text.check(stream_key, field="stream key", max_length=128)
    for field, limit in (("correlation_id", 191), ("idempotency_key", 191)):
        if message.get(field) is not None:
            text.check(message[field], field=field, max_length=limit, allow_empty=True)
    if message.get("payload_reference") is not None:
        text.check(
            message["payload_reference"],
            field="payload_reference",
            max_length=4096,
            allow_empty=True,
        )
    text.check_json(message.get("metadata") or {}, field="metadata")


class MessageStream:
    """One named stream of a workflow instance.

    ``peek``/``has_pending``/``pending_count`` read what has been delivered;
    ``receive`` consumes and advances the durable cursor; ``send_reference``
    sends to another instance's stream with the same key (exactly once).
    """

    def __init__(self, runtime: WorkflowRuntime, key: str) -> None:
        text.check(key, field="stream key", max_length=128)
        self._runtime = runtime
        self._key = key

    def __repr__(self) -> str:
        return f"<MessageStream {self._key}>"

    def key(self) -> str:
        return self._key

    def cursor(self) -> int:
        """How many messages this instance has consumed from the stream (across runs)."""
        return self._runtime.stream_cursor(self._key)

    def has_pending(self) -> bool:
        return bool(self._runtime.stream_pending(self._key))

    def pending_count(self) -> int:
        return len(self._runtime.stream_pending(self._key))

    def peek(self, limit: int = 100) -> list[dict[str, Any]]:
        """Delivered, unconsumed messages, oldest first, without consuming them."""
        return self._runtime.stream_pending(self._key)[:limit]

    def receive(self, limit: int = 1) -> list[dict[str, Any]]:
        """Consume up to ``limit`` messages (none if nothing is pending); a durable step."""
        return self._runtime.stream_receive(self._key, limit)

    def receive_one(self) -> dict[str, Any] | None:
        taken = self.receive(1)
        return taken[0] if taken else None

    def send_reference(
        self,
        target_instance_id: str,
        payload_reference: str | None = None,
        *,
        channel: str = "workflow_message",
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: dt.datetime | None = None,
    ) -> str:
        """Send a message to ``target_instance_id``'s stream; returns its idempotency key."""
        message = {
            "target_instance_id": target_instance_id,
            "payload_reference": payload_reference,
            "channel": channel,
            "correlation_id": correlation_id,
            "idempotency_key": idempotency_key,
            "metadata": metadata or {},
            "expires_at": expires_at.isoformat() if expires_at else None,
        }
        validate_instance_id(target_instance_id)
        check_message(self._key, message)
        return self._runtime.stream_send(self._key, message)
