"""Message streams inside the runtime: per-stream buffers fed from history, a durable cursor.

Messages reach a run as ``MessageReceived`` input events (delivered in history
order like signals). ``receive`` is a durable step recorded as
``MessageCursorAdvanced`` with the ids it consumed; ``pending`` only reads the
buffer, which replay rebuilds identically. ``send`` is a durable step; the
executor stores the message and wakes the target.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from durable_workflow.engine.commands import AdvanceCursor, SendMessage
from durable_workflow.engine.core import Core
from durable_workflow.exceptions import NonDeterminismError


class Streams:
    """The message streams of one run: buffers and cursors."""

    def __init__(self, core: Core, run_id: str) -> None:
        self._core = core
        self._run_id = run_id
        self._buffers: dict[str, deque[dict[str, Any]]] = {}
        #: Messages consumed per stream; a continued run starts from them.
        self.cursors: dict[str, int] = {}

    def deliver(self, payload: dict[str, Any]) -> None:
        self._buffers.setdefault(str(payload["stream_key"]), deque()).append(dict(payload))

    def pending(self, stream: str) -> list[dict[str, Any]]:
        return list(self._buffers.get(stream, ()))

    def cursor(self, stream: str) -> int:
        return self.cursors.get(stream, 0)

    def receive(self, stream: str, limit: int) -> list[dict[str, Any]]:
        if limit < 1:
            raise ValueError("receive() needs a limit of at least 1")
        core = self._core
        step, recorded = core.claim(("receive", stream))
        buffer = self._buffers.setdefault(stream, deque())
        if recorded is not None:
            ids = list(recorded.payload.get("message_ids") or [])
            taken = [buffer.popleft() for _ in range(min(len(ids), len(buffer)))]
            if [m["message_id"] for m in taken] != ids:
                core.fail_fatally(
                    NonDeterminismError(
                        step,
                        f"MessageCursorAdvanced({stream}, {ids})",
                        f"receive({stream}) -> {[m['message_id'] for m in taken]}",
                    )
                )
        else:
            taken = [buffer.popleft() for _ in range(min(limit, len(buffer)))]
        cursor = self.cursors.get(stream, 0) + len(taken)
        self.cursors[stream] = cursor
        command = AdvanceCursor(
            step=step,
            stream_key=stream,
            cursor=cursor,
            message_ids=[m["message_id"] for m in taken],
        )
        core.outbox.issue(command, recorded)
        return taken

    def send(self, stream: str, message: dict[str, Any]) -> str:
        """Record the send once; returns the message's idempotency key."""
        step, recorded = self._core.claim(("send_message", stream))
        key = message.get("idempotency_key") or f"{self._run_id}:{step}"
        command = SendMessage(
            step=step, stream_key=stream, message={**message, "idempotency_key": key}
        )
        self._core.outbox.issue(command, recorded)
        return str(key)
