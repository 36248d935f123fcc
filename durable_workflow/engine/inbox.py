"""Inputs that arrive from outside the body: signals, updates, and waits on them.

Mixed into ``WorkflowRuntime``. Delivery happens on the hub greenlet, in
history order; handlers (signal methods, update methods) run on greenlets of
their own, scheduled FIFO with the body.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import greenlet

from durable_workflow.engine import failures
from durable_workflow.engine.commands import (
    ApplySignal,
    ApplyUpdate,
    CancelTimer,
    CompleteUpdate,
    ResolveConditionWait,
)
from durable_workflow.engine.events import EventType, HistoryEvent
from durable_workflow.exceptions import NonDeterminismError

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import Future, WorkflowRuntime


def signal_value(arguments: list[Any]) -> Any:
    """What a signal wait returns: True for no arguments, the value for one, else the list."""
    if not arguments:
        return True
    if len(arguments) == 1:
        return arguments[0]
    return list(arguments)


class InboxMixin:
    def _init_inbox(self: WorkflowRuntime) -> None:
        self._signal_buffer: dict[str, deque[tuple[str, Any]]] = {}
        self._signal_waits: dict[str, list[int]] = {}
        self._wait_kind: dict[int, tuple[str, str | None]] = {}
        self._conditions: dict[int, Callable[[], Any]] = {}
        self._timeout_pending: set[int] = set()
        self._restricted: set[greenlet.greenlet] = set()

    def _new_future(self: WorkflowRuntime, step: int) -> Future:
        from durable_workflow.engine.runtime import Future

        future = self._futures[step] = Future(step)
        return future

    # ------------------------------------------------------------- delivery
    def _deliver_message(self: WorkflowRuntime, event: HistoryEvent) -> None:
        if event.event_type == EventType.SIGNAL_RECEIVED:
            self._deliver_signal(event.payload)
        elif event.event_type == EventType.MESSAGE_RECEIVED:
            self._deliver_stream_message(event.payload)
        else:
            self._deliver_update(event.payload)

    def _deliver_signal(self: WorkflowRuntime, payload: dict[str, Any]) -> None:
        name = str(payload["signal_name"])
        signal_id = str(payload["signal_id"])
        arguments = list(self._decode(payload.get("arguments")) or [])
        handlers = getattr(type(self.instance), "_dw_signal_handlers", {})
        if name in handlers:
            method = getattr(self.instance, handlers[name])
            self._spawn(self._run_handler, method, arguments)
            self._mark(
                ("signal", signal_id),
                ApplySignal(
                    step=self._step, signal_id=signal_id, signal_name=name, by_handler=True
                ),
            )
            return
        waits = self._signal_waits.get(name, [])
        while waits and self._futures[waits[0]].done:
            waits.pop(0)
        if not waits:
            self._signal_buffer.setdefault(name, deque()).append(
                (signal_id, signal_value(arguments))
            )
            return
        step = waits.pop(0)
        self._resolve(self._futures[step], value=signal_value(arguments))
        self._signal_consumed(step, signal_id, name)

    def _signal_consumed(self: WorkflowRuntime, step: int, signal_id: str, name: str) -> None:
        self._mark(
            ("signal", signal_id), ApplySignal(step=step, signal_id=signal_id, signal_name=name)
        )
        self._cancel_timeout(step)

    def _run_handler(self: WorkflowRuntime, method: Callable[..., Any], args: list[Any]) -> None:
        from durable_workflow.engine.runtime import _Abort

        try:
            method(*args)
        except _Abort:
            return
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:
            self._fail_run(exc)

    def _deliver_update(self: WorkflowRuntime, payload: dict[str, Any]) -> None:
        name = str(payload["update_name"])
        update_id = str(payload["update_id"])
        handler = getattr(type(self.instance), "_dw_updates", {}).get(name)
        if handler is None:
            raise NonDeterminismError(
                self._step, f"UpdateAccepted({name})", None, "the workflow no longer declares it"
            )
        arguments = list(self._decode(payload.get("arguments")) or [])
        self._spawn(self._run_update, update_id, name, handler.fn, arguments)

    def _run_update(
        self: WorkflowRuntime, update_id: str, name: str, fn: Callable[..., Any], args: list[Any]
    ) -> None:
        from durable_workflow.engine.runtime import _Abort

        self._mark(
            ("update_applied", update_id),
            ApplyUpdate(update_id=update_id, update_name=name, step=self._step),
        )
        done = ("update_completed", update_id)
        try:
            result = self._encode(fn(self.instance, *args))
        except _Abort:
            return
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:  # a failed update leaves the run open
            self._mark(done, CompleteUpdate(update_id, name, failure=failures.describe(exc)))
            return
        self._mark(done, CompleteUpdate(update_id, name, result=result))

    # ---------------------------------------------------------------- waits
    def _abandon(self: WorkflowRuntime, future: Future) -> None:
        """A wait the body will never come back to (it was cancelled out of it)."""
        future.done = True
        for step, candidate in list(self._futures.items()):
            if candidate is future:
                self._conditions.pop(step, None)

    def _timer_fired(self: WorkflowRuntime, step: int, future: Future) -> None:
        self._timeout_pending.discard(step)
        kind = self._wait_kind.get(step, ("timer", None))[0]
        if kind == "condition":
            self._conditions.pop(step, None)
            self._resolve_condition(step, future, satisfied=False)
        else:
            self._resolve(future, value=None)

    def _cancel_timeout(self: WorkflowRuntime, step: int) -> None:
        if step in self._timeout_pending:
            self._timeout_pending.discard(step)
            self._mark(("timer_cancelled", step), CancelTimer(step=step))

    def _resolve_condition(
        self: WorkflowRuntime, step: int, future: Future, *, satisfied: bool
    ) -> None:
        self._resolve(future, value=satisfied)
        self._mark(("condition", step), ResolveConditionWait(step=step, satisfied=satisfied))
        if satisfied:
            self._cancel_timeout(step)

    def _evaluate(
        self: WorkflowRuntime, step: int, future: Future, predicate: Callable[[], Any]
    ) -> bool:
        """Run a predicate where durable helpers are refused; resolve the wait if it holds."""
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["value"] = bool(predicate())
            except BaseException as exc:
                outcome["error"] = exc

        gr = greenlet.greenlet(call, parent=greenlet.getcurrent())
        gr.dw_runtime = self  # type: ignore[attr-defined]
        self._restricted.add(gr)
        try:
            gr.switch()
        finally:
            self._restricted.discard(gr)
        if self._fatal is not None:
            raise self._fatal
        if "error" in outcome:
            self._conditions.pop(step, None)
            self._resolve(future, error=outcome["error"])
            return True
        if outcome["value"]:
            self._conditions.pop(step, None)
            self._resolve_condition(step, future, satisfied=True)
            return True
        return False

    def _check_conditions(self: WorkflowRuntime) -> bool:
        """Re-check open condition waits in step order; True if any resolved."""
        progressed = False
        for step in sorted(self._conditions):
            predicate = self._conditions.get(step)
            if predicate is not None and self._evaluate(step, self._futures[step], predicate):
                progressed = True
        return progressed
