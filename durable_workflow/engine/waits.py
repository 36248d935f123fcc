"""Waits on signals and conditions: opening them, their deadlines, and what ends them.

A signal wait takes the oldest buffered signal of its name, or waits for the
next one; a condition wait holds once its predicate (run where durable helpers
are refused) is true, re-checked whenever the body quiesces. Either may have a
deadline: a timer recorded at the wait's own step that, if it fires first,
ends the wait with ``None`` (signal) or ``False`` (condition); a wait that ends
otherwise cancels its pending deadline.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable
from typing import Any

from durable_workflow.engine.commands import (
    ApplySignal,
    CancelTimer,
    OpenConditionWait,
    OpenSignalWait,
    ResolveConditionWait,
    StartTimer,
)
from durable_workflow.engine.core import Core
from durable_workflow.engine.operations import ConditionWaitOp, SignalWaitOp, WaitOp
from durable_workflow.engine.scheduler import Future
from durable_workflow.exceptions import DurableWorkflowError, NonDeterminismError

_CONDITION_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class InvalidConditionKeyError(DurableWorkflowError, ValueError):
    """A condition wait key is not a URL-safe label of 1 to 128 characters."""


def validate_condition_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not _CONDITION_KEY.fullmatch(key.strip()):
        raise InvalidConditionKeyError(
            "condition wait keys must be 1 to 128 characters of letters, digits, "
            f"'.', '_', '-' or ':'; got {key!r}"
        )
    return key.strip()


def fingerprint(predicate: Callable[[], Any]) -> str:
    """A stable label for a predicate: where it is defined, not what it compiles to."""
    name = f"{getattr(predicate, '__module__', '')}.{getattr(predicate, '__qualname__', '')}"
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()[:16]


def signal_value(arguments: list[Any]) -> Any:
    """What a signal wait returns: True for no arguments, the value for one, else the list."""
    if not arguments:
        return True
    if len(arguments) == 1:
        return arguments[0]
    return list(arguments)


class Waits:
    """The open signal and condition waits of one run (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._signal_buffer: dict[str, deque[tuple[str, Any]]] = {}
        self._signal_waits: dict[str, list[SignalWaitOp]] = {}
        self._conditions: dict[int, ConditionWaitOp] = {}

    # ----------------------------------------------------------------- signals
    def open_signal_wait(self, name: str, timeout: float | None) -> Future:
        core = self._core
        step, recorded = core.claim(("signal", name))
        op = core.ops.add(SignalWaitOp(step, name))
        core.outbox.issue(
            OpenSignalWait(step=step, signal_name=name, timeout_seconds=timeout), recorded
        )
        buffered = self._signal_buffer.get(name)
        if buffered:
            signal_id, value = buffered.popleft()
            core.scheduler.resolve(op.future, value=value)
            self._signal_consumed(op, signal_id)
        elif timeout == 0:
            core.outbox.issue(StartTimer(step, 0, kind="signal_timeout"), recorded)
            core.scheduler.resolve(op.future, value=None)
        else:
            if timeout:
                core.outbox.issue(StartTimer(step, timeout, kind="signal_timeout"), recorded)
                op.timeout_pending = True
            self._signal_waits.setdefault(name, []).append(op)
        return op.future

    def deliver_signal(self, name: str, signal_id: str, arguments: list[Any]) -> None:
        """A signal no handler takes: the oldest open wait for it gets it, or it is buffered."""
        waits = self._signal_waits.get(name, [])
        while waits and waits[0].future.done:
            waits.pop(0)
        if not waits:
            self._signal_buffer.setdefault(name, deque()).append(
                (signal_id, signal_value(arguments))
            )
            return
        op = waits.pop(0)
        self._core.scheduler.resolve(op.future, value=signal_value(arguments))
        self._signal_consumed(op, signal_id)

    def _signal_consumed(self, op: SignalWaitOp, signal_id: str) -> None:
        self._core.outbox.mark(
            ("signal", signal_id),
            ApplySignal(step=op.step, signal_id=signal_id, signal_name=str(op.name)),
        )
        self.cancel_timeout(op)

    # -------------------------------------------------------------- conditions
    def open_condition_wait(
        self, predicate: Callable[[], Any], key: str | None, timeout: float | None
    ) -> Future:
        core = self._core
        label = fingerprint(predicate)
        step, recorded = core.claim(("condition", key))
        recorded_label = (
            recorded.payload.get("condition_definition_fingerprint") if recorded else None
        )
        if recorded_label not in (None, label):
            core.fail_fatally(
                NonDeterminismError(
                    step,
                    f"ConditionWaitOpened({recorded_label})",
                    f"ConditionWaitOpened({label})",
                    "the wait's predicate is a different function",
                )
            )
        op = core.ops.add(ConditionWaitOp(step, key, predicate))
        core.outbox.issue(
            OpenConditionWait(
                step=step, condition_key=key, fingerprint=label, timeout_seconds=timeout
            ),
            recorded,
        )
        if self._evaluate(op):
            pass
        elif timeout == 0:
            core.outbox.issue(StartTimer(step, 0, kind="condition_timeout"), recorded)
            self._resolve_condition(op, satisfied=False)
        else:
            if timeout:
                core.outbox.issue(StartTimer(step, timeout, kind="condition_timeout"), recorded)
                op.timeout_pending = True
            self._conditions[step] = op
        return op.future

    def _evaluate(self, op: ConditionWaitOp) -> bool:
        """Run a predicate where durable helpers are refused; resolve the wait if it holds."""
        predicate = op.predicate
        holds, error = self._core.scheduler.call_restricted(lambda: bool(predicate()))
        if error is not None:
            self._conditions.pop(op.step, None)
            self._core.scheduler.resolve(op.future, error=error)
            return True
        if holds:
            self._conditions.pop(op.step, None)
            self._resolve_condition(op, satisfied=True)
            return True
        return False

    def check_conditions(self) -> bool:
        """Re-check open condition waits in step order; True if any resolved."""
        if not self._conditions:
            return False
        progressed = False
        for step in sorted(self._conditions):
            op = self._conditions.get(step)
            if op is not None and self._evaluate(op):
                progressed = True
        return progressed

    def _resolve_condition(self, op: ConditionWaitOp, *, satisfied: bool) -> None:
        self._core.scheduler.resolve(op.future, value=satisfied)
        self._core.outbox.mark(
            ("condition", op.step), ResolveConditionWait(step=op.step, satisfied=satisfied)
        )
        if satisfied:
            self.cancel_timeout(op)

    # --------------------------------------------------------------- endings
    def timed_out(self, op: WaitOp) -> None:
        """The wait's deadline fired before anything else ended it."""
        op.timeout_pending = False
        if isinstance(op, ConditionWaitOp):
            self._conditions.pop(op.step, None)
            self._resolve_condition(op, satisfied=False)
        else:
            self._core.scheduler.resolve(op.future, value=None)

    def cancel_timeout(self, op: WaitOp) -> None:
        if op.timeout_pending:
            op.timeout_pending = False
            self._core.outbox.mark(("timer_cancelled", op.step), CancelTimer(step=op.step))

    def forget(self, op: WaitOp) -> None:
        """The body gave the wait up (cancelled out of it): stop checking its predicate."""
        self._conditions.pop(op.step, None)
