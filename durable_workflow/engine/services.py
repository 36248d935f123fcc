"""Run-level services of the runtime: history budget, continue-as-new, queries,
and local-activity outcomes (which resolve inline at their step).

Mixed into ``WorkflowRuntime``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import greenlet

from durable_workflow.engine import failures
from durable_workflow.engine.events import RESOLUTION_EVENTS, EventType, HistoryEvent
from durable_workflow.exceptions import ActivityFailed, ActivityTimeoutError

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import Future, WorkflowRuntime


class ContinueAsNewRequested(BaseException):
    """Raised by ``continue_as_new()`` to end the body; never seen by user code."""

    def __init__(self, arguments: list[Any]):
        self.arguments = arguments
        super().__init__("continue as new")


class ServicesMixin:
    def history_length(self: WorkflowRuntime) -> int:
        """Events up to the one being delivered: the same value on every replay."""
        return self._seen[-1].sequence if self._seen else 0

    def history_size(self: WorkflowRuntime) -> int:
        """Payload bytes of the events up to the one being delivered (deterministic)."""
        import json

        counted, size = self._sizes
        for event in self._seen[counted:]:
            size += len(json.dumps(event.payload, separators=(",", ":")))
        self._sizes = (len(self._seen), size)
        return size

    def should_continue_as_new(self: WorkflowRuntime) -> bool:
        events = self.limits.get("continue_as_new_event_threshold", 10_000)
        size = self.limits.get("continue_as_new_size_threshold", 5 * 1024 * 1024)
        return bool(events and self.history_length() >= events) or bool(
            size and self.history_size() >= size
        )

    def continue_as_new(self: WorkflowRuntime, arguments: list[Any]) -> None:
        if greenlet.getcurrent() is not (self._greenlets[0] if self._greenlets else None):
            raise TypeError("continue_as_new() can only be called from the workflow body")
        raise ContinueAsNewRequested(arguments)

    def _index_local(self: WorkflowRuntime, event: HistoryEvent) -> None:
        step = event.step
        if step is None:
            return
        kind = event.event_type
        if kind == EventType.ACTIVITY_SCHEDULED:
            if step in self._issued:
                self._verify(step, event)
            else:
                self._recorded[step] = event
        elif kind == EventType.ACTIVITY_STARTED:
            self._local_started[step] = int(event.payload.get("attempt_number", 1))
        elif kind == EventType.ACTIVITY_RETRY_SCHEDULED:
            self._local_retried[step] = (
                int(event.payload.get("attempt_number", 1)),
                event.payload.get("retry_reason") or "failure",
            )
        elif kind in RESOLUTION_EVENTS:
            self._local_outcomes[step] = event
            future = self._futures.get(step)
            if future is not None and not future.done:
                self._resolve_local(future, event)

    def _resolve_local(self: WorkflowRuntime, future: Future, event: HistoryEvent) -> None:
        if event.recorded_at is not None:
            self._now = event.recorded_at
        if event.event_type == EventType.ACTIVITY_COMPLETED:
            self._resolve(future, value=self._decode(event.payload.get("result")))
        elif event.event_type == EventType.ACTIVITY_TIMED_OUT:
            error = failures.rebuild(ActivityTimeoutError, event.payload)
            error._timeout_kind = event.payload.get("timeout_kind")  # type: ignore[attr-defined]
            self._resolve(future, error=error)
        else:
            self._resolve(future, error=failures.rebuild(ActivityFailed, event.payload))

    # ---------------------------------------------------------------- queries
    def query(self: WorkflowRuntime, method: Callable[..., Any], args: list[Any]) -> Any:
        """Call a query method on the replayed instance; durable helpers are refused."""
        self._query_mode = True
        self._hub = greenlet.getcurrent()
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["value"] = method(*args)
            except BaseException as exc:
                outcome["error"] = exc

        gr = greenlet.greenlet(call, parent=self._hub)
        gr.dw_runtime = self  # type: ignore[attr-defined]
        self._restricted.add(gr)
        gr.switch()
        if self._fatal is not None:
            raise self._fatal
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def enter_query_mode(self: WorkflowRuntime) -> None:
        """Replay without producing commands (queries and update validators)."""
        self._query_mode = True
