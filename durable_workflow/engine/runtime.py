"""The replay runtime: runs a workflow body in greenlets against its history.

One ``WorkflowRuntime`` exists per run being executed. The executor feeds it
history events (the whole log on a cold start, only the new tail when a warm
runtime is reused) and collects the commands the body issued that history did
not already hold.

Rules (see docs/explanation/replay.md):

* every durable helper call takes the next *step* number; a step recorded in
  history must be asked for again with the same kind and name, otherwise the
  task fails with ``NonDeterminismError`` and nothing is written;
* inputs from outside the body (activity results, timer fires...) are
  delivered one at a time in history order, and after each delivery every
  ready greenlet runs, FIFO, until it blocks or finishes;
* inline steps (side effects, zero-length timers) resolve from their own
  recorded event at the moment the body reaches them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import greenlet

from durable_workflow.codec import envelope
from durable_workflow.engine import failures
from durable_workflow.engine.commands import (
    CloseCommand,
    Command,
    CompleteWorkflow,
    FailWorkflow,
    RecordFailureHandled,
    RecordSideEffect,
    ScheduleActivity,
    StartTimer,
)
from durable_workflow.engine.events import (
    COMMAND_EVENTS,
    RESOLUTION_EVENTS,
    TERMINAL_EVENTS,
    EventType,
    HistoryEvent,
)
from durable_workflow.exceptions import (
    ActivityFailed,
    DurableWorkflowError,
    NonDeterminismError,
)

Signature = tuple[str, str | None]

_SIGNATURE_OF_EVENT: dict[str, Callable[[dict[str, Any]], Signature]] = {
    EventType.ACTIVITY_SCHEDULED: lambda p: ("activity", p.get("activity_type")),
    EventType.TIMER_SCHEDULED: lambda p: ("timer", None),
    EventType.SIDE_EFFECT_RECORDED: lambda p: ("side_effect", None),
}
_EVENT_OF_KIND = {
    "activity": EventType.ACTIVITY_SCHEDULED,
    "timer": EventType.TIMER_SCHEDULED,
    "side_effect": EventType.SIDE_EFFECT_RECORDED,
}


class _Abort(BaseException):
    """Unwinds a body after a fatal engine error; never seen by user code."""


def _describe(sig: Signature) -> str:
    kind, name = sig
    label = _EVENT_OF_KIND.get(kind, kind)
    return f"{label}({name})" if name else str(label)


class _Future:
    __slots__ = ("done", "error", "value", "waiters")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.waiters: list[greenlet.greenlet] = []


class WorkflowRuntime:
    """Executes one run's body deterministically against its history."""

    def __init__(
        self,
        *,
        factory: Callable[[], Any],
        workflow_id: str,
        run_id: str,
        codec: str = envelope.DEFAULT_CODEC,
    ) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.codec = codec
        self.instance: Any = None
        self.closed: CloseCommand | None = None
        self._factory = factory
        self._recorded: dict[int, HistoryEvent] = {}
        self._issued: dict[int, Signature] = {}
        self._handled: set[int] = set()
        self._futures: dict[int, _Future] = {}
        self._thrown: dict[greenlet.greenlet, tuple[int, BaseException]] = {}
        self._ready: deque[tuple[greenlet.greenlet, Any, BaseException | None]] = deque()
        self._greenlets: list[greenlet.greenlet] = []
        self._new: list[Command] = []
        self._step = 0
        self._last_sequence = 0
        self._now: dt.datetime | None = None
        self._hub: greenlet.greenlet | None = None
        self._fatal: BaseException | None = None
        self._unwinding = False
        self._history_closed = False

    # ------------------------------------------------------------------ feeding
    @property
    def last_sequence(self) -> int:
        return self._last_sequence

    @property
    def step_count(self) -> int:
        return self._step

    def feed(self, events: Iterable[HistoryEvent]) -> None:
        """Apply history events not seen yet, then run the body to quiescence."""
        fresh = [e for e in events if e.sequence > self._last_sequence]
        if not fresh:
            return
        self._hub = greenlet.getcurrent()
        for gr in self._greenlets:
            if not gr.dead:
                gr.parent = self._hub
        self._index(fresh)
        for event in fresh:
            self._apply(event)
            self._last_sequence = event.sequence
            self._run_ready()
        self._check_unreached()

    def take_commands(self) -> list[Command]:
        """The new commands issued since the last call, in issue order."""
        new, self._new = self._new, []
        return new

    def _index(self, events: list[HistoryEvent]) -> None:
        for event in events:
            step = event.step
            if step is None:
                continue
            if event.event_type in COMMAND_EVENTS:
                if step in self._issued:
                    self._verify(step, event)
                else:
                    self._recorded[step] = event
            elif event.event_type == EventType.FAILURE_HANDLED:
                self._handled.add(step)

    def _verify(self, step: int, event: HistoryEvent) -> None:
        recorded = _SIGNATURE_OF_EVENT[event.event_type](event.payload)
        if recorded != self._issued[step]:
            raise NonDeterminismError(step, _describe(recorded), _describe(self._issued[step]))

    def _apply(self, event: HistoryEvent) -> None:
        kind = event.event_type
        if kind == EventType.WORKFLOW_STARTED:
            self._now = event.recorded_at
            args = envelope.decode(event.payload["arguments"], expected_codec=self.codec)
            self._spawn(self._main, *(args or []))
        elif kind in RESOLUTION_EVENTS:
            self._deliver(event)
        elif kind in TERMINAL_EVENTS:
            self._history_closed = True

    def _deliver(self, event: HistoryEvent) -> None:
        step = event.step
        assert step is not None
        future = self._futures.get(step)
        if future is None:
            command = self._recorded.get(step)
            recorded = (
                _describe(_SIGNATURE_OF_EVENT[command.event_type](command.payload))
                if command is not None
                else str(event.event_type)
            )
            raise NonDeterminismError(
                step, recorded, None, "history holds a step the code never reached"
            )
        if future.done:
            return  # resolved inline when the body reached it
        if event.recorded_at is not None:
            self._now = event.recorded_at
        kind = event.event_type
        if kind == EventType.ACTIVITY_COMPLETED:
            self._resolve(future, value=self._decode(event.payload.get("result")))
        elif kind == EventType.TIMER_FIRED:
            self._resolve(future, value=None)
        else:
            self._resolve(future, error=failures.rebuild(ActivityFailed, event.payload))

    def _check_unreached(self) -> None:
        if self._fatal is not None:
            return
        unreached = sorted(s for s in self._recorded if s not in self._issued)
        if unreached and self._quiescent():
            step = unreached[0]
            event = self._recorded[step]
            recorded = _SIGNATURE_OF_EVENT[event.event_type](event.payload)
            raise NonDeterminismError(
                step, _describe(recorded), None, "history holds a step the code never reached"
            )

    def _quiescent(self) -> bool:
        return not self._ready

    # --------------------------------------------------------------- scheduling
    def _spawn(self, fn: Callable[..., Any], *args: Any) -> greenlet.greenlet:
        gr = greenlet.greenlet(fn, parent=self._hub)
        gr.dw_runtime = self  # type: ignore[attr-defined]
        self._greenlets.append(gr)
        self._ready.append((gr, args, None))
        return gr

    def _run_ready(self) -> None:
        while self._ready:
            gr, value, error = self._ready.popleft()
            if gr.dead:
                continue
            if error is not None:
                gr.throw(error)
                self._after_throw(gr, error)
            elif not gr:  # not started yet: ``value`` holds the call arguments
                gr.switch(*value)
            else:
                gr.switch(value)
            if self._fatal is not None:
                raise self._fatal

    def _after_throw(self, gr: greenlet.greenlet, error: BaseException) -> None:
        step, thrown = self._thrown.pop(gr, (0, error))
        escaped = getattr(gr, "dw_error", None) is thrown
        if not escaped and step and step not in self._handled:
            self._handled.add(step)
            self._new.append(
                RecordFailureHandled(
                    step=step,
                    exception_type=getattr(thrown, "exception_type", "") or type(thrown).__name__,
                    message=str(thrown),
                )
            )

    def _resolve(
        self, future: _Future, *, value: Any = None, error: BaseException | None = None
    ) -> None:
        future.done, future.value, future.error = True, value, error
        for gr in future.waiters:
            self._ready.append((gr, value, error))
        future.waiters.clear()

    def _main(self, *args: Any) -> None:
        gr = greenlet.getcurrent()
        try:
            self.instance = self._factory()
            result = self.instance.handle(*args)
            self.closed = CompleteWorkflow(result=self._encode(result))
        except _Abort:
            return
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:  # the body failed: that is an outcome
            gr.dw_error = exc  # type: ignore[attr-defined]
            self.closed = FailWorkflow(failure=failures.describe(exc))

    # ------------------------------------------------- called from body code
    def now(self) -> dt.datetime:
        assert self._now is not None
        return self._now

    def schedule_activity(
        self,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        options: dict[str, Any],
        queue: str | None,
        connection: str | None,
    ) -> Any:
        step = self._next_step(("activity", activity_type))
        future = self._futures[step] = _Future()
        if step not in self._recorded:
            self._new.append(
                ScheduleActivity(
                    step=step,
                    activity_type=activity_type,
                    activity_class=activity_class,
                    arguments=self._encode(arguments),
                    options=options,
                    queue=queue,
                    connection=connection,
                )
            )
        return self._wait(step, future)

    def timer(self, seconds: int) -> None:
        step = self._next_step(("timer", None))
        future = self._futures[step] = _Future()
        recorded = self._recorded.get(step)
        if recorded is None:
            self._new.append(StartTimer(step=step, delay_seconds=seconds))
            if seconds == 0:
                self._resolve(future)
        elif int(recorded.payload.get("delay_seconds", -1)) == 0:
            self._resolve(future)
        return self._wait(step, future)

    def side_effect(self, fn: Callable[[], Any]) -> Any:
        step = self._next_step(("side_effect", None))
        recorded = self._recorded.get(step)
        if recorded is not None:
            return self._decode(recorded.payload.get("result"))
        value = fn()
        self._new.append(RecordSideEffect(step=step, result=self._encode(value)))
        return value

    def _next_step(self, sig: Signature) -> int:
        if self._unwinding:
            raise greenlet.GreenletExit()
        self._step += 1
        step = self._step
        recorded = self._recorded.get(step)
        if recorded is not None:
            recorded_sig = _SIGNATURE_OF_EVENT[recorded.event_type](recorded.payload)
            if recorded_sig != sig:
                self.fail_fatally(
                    NonDeterminismError(step, _describe(recorded_sig), _describe(sig))
                )
        self._issued[step] = sig
        return step

    def _wait(self, step: int, future: _Future) -> Any:
        if not future.done:
            gr = greenlet.getcurrent()
            future.waiters.append(gr)
            assert self._hub is not None
            try:
                return self._hub.switch()
            except BaseException as exc:
                if exc is future.error:
                    self._thrown[gr] = (step, exc)
                raise
        if future.error is not None:
            self._thrown[greenlet.getcurrent()] = (step, future.error)
            raise future.error
        return future.value

    def fail_fatally(self, error: BaseException) -> None:
        """Stop the task: ``error`` leaves ``feed`` and nothing is persisted."""
        self._fatal = error
        raise _Abort()

    # ----------------------------------------------------------------- codec
    def _encode(self, value: Any) -> dict[str, Any]:
        return envelope.encode(value, self.codec)

    def _decode(self, env: Any) -> Any:
        return envelope.decode(env, expected_codec=self.codec)

    # -------------------------------------------------------------- teardown
    def dispose(self) -> None:
        """Unwind every suspended greenlet deliberately (runs user finally blocks)."""
        self._unwinding = True
        hub = greenlet.getcurrent()
        for gr in self._greenlets:
            if not gr.dead:
                gr.parent = hub
                with contextlib.suppress(DurableWorkflowError):
                    gr.throw(greenlet.GreenletExit())
        self._greenlets.clear()


def current_runtime() -> WorkflowRuntime | None:
    """The runtime whose body is executing on this greenlet, if any."""
    return getattr(greenlet.getcurrent(), "dw_runtime", None)
