"""Message streams inside the runtime: per-stream buffers fed from history, a durable cursor.

Mixed into ``WorkflowRuntime``. Messages reach a run as ``MessageReceived``
input events (delivered in history order like signals). ``receive`` is a
durable step recorded as ``MessageCursorAdvanced`` with the ids it consumed;
``peek``/``pending_count`` only read the buffer, which replay rebuilds
identically. ``send`` is a durable step; the executor stores the message and
wakes the target.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from durable_workflow.engine.commands import AdvanceCursor, SendMessage
from durable_workflow.exceptions import NonDeterminismError

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import WorkflowRuntime


class StreamsMixin:
    def _init_streams(self: WorkflowRuntime) -> None:
        self._stream_buffers: dict[str, deque[dict[str, Any]]] = {}
        self._stream_cursors: dict[str, int] = {}

    def _deliver_stream_message(self: WorkflowRuntime, payload: dict[str, Any]) -> None:
        self._stream_buffers.setdefault(str(payload["stream_key"]), deque()).append(dict(payload))

    def stream_pending(self: WorkflowRuntime, stream: str) -> list[dict[str, Any]]:
        return list(self._stream_buffers.get(stream, ()))

    def stream_cursor(self: WorkflowRuntime, stream: str) -> int:
        return self._stream_cursors.get(stream, 0)

    def stream_receive(self: WorkflowRuntime, stream: str, limit: int) -> list[dict[str, Any]]:
        if limit < 1:
            raise ValueError("receive() needs a limit of at least 1")
        step, recorded = self._next_step(("receive", stream))
        buffer = self._stream_buffers.setdefault(stream, deque())
        if recorded is not None:
            ids = list(recorded.payload.get("message_ids") or [])
            taken = [buffer.popleft() for _ in range(min(len(ids), len(buffer)))]
            if [m["message_id"] for m in taken] != ids:
                self.fail_fatally(
                    NonDeterminismError(
                        step,
                        f"MessageCursorAdvanced({stream}, {ids})",
                        f"receive({stream}) -> {[m['message_id'] for m in taken]}",
                    )
                )
        else:
            taken = [buffer.popleft() for _ in range(min(limit, len(buffer)))]
        cursor = self._stream_cursors.get(stream, 0) + len(taken)
        self._stream_cursors[stream] = cursor
        self._issue(
            AdvanceCursor(
                step=step,
                stream_key=stream,
                cursor=cursor,
                message_ids=[m["message_id"] for m in taken],
            ),
            recorded,
        )
        return taken

    def stream_send(self: WorkflowRuntime, stream: str, message: dict[str, Any]) -> str:
        """Record the send once; returns the message's idempotency key."""
        step, recorded = self._next_step(("send_message", stream))
        key = message.get("idempotency_key") or f"{self.run_id}:{step}"
        self._issue(
            SendMessage(step=step, stream_key=stream, message={**message, "idempotency_key": key}),
            recorded,
        )
        return str(key)
