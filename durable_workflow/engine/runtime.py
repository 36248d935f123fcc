"""The replay runtime: runs a workflow body in greenlets against its history.

One ``WorkflowRuntime`` exists per run being executed. The executor feeds it
history events (the whole log on a cold start, only the new tail when a warm
runtime is reused) and collects the commands the body issued that history did
not already hold.

Rules (see docs/explanation/replay.md):

* every durable helper call takes the next *step* number; a step recorded in
  history must be asked for again with the same kind and name, otherwise the
  task fails with ``NonDeterminismError`` and nothing is written;
* inputs from outside the body (activity results, timer fires, signals,
  updates) are delivered one at a time in history order; after each delivery
  every ready greenlet runs, FIFO, until it blocks or finishes, and pending
  condition predicates are re-checked;
* inline steps (side effects, zero-length timers, waits that are already
  satisfied) resolve at the moment the body reaches them;
* facts the body produces along the way (a failure it handled, a signal it
  consumed, an update it applied) are recorded once and recognised on replay.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import greenlet

from durable_workflow.codec import envelope
from durable_workflow.engine import failures
from durable_workflow.engine.commands import (
    CancelWorkflow,
    CloseCommand,
    Command,
    CompleteWorkflow,
    ContinueAsNew,
    FailWorkflow,
    RecordFailureHandled,
)
from durable_workflow.engine.events import (
    COMMAND_EVENTS,
    MESSAGE_EVENTS,
    RESOLUTION_EVENTS,
    TERMINAL_EVENTS,
    EventType,
    HistoryEvent,
)
from durable_workflow.engine.groups import GroupsMixin
from durable_workflow.engine.inbox import InboxMixin
from durable_workflow.engine.services import ContinueAsNewRequested, ServicesMixin
from durable_workflow.engine.steps import StepsMixin
from durable_workflow.engine.streams import StreamsMixin
from durable_workflow.engine.versions import VersionsMixin
from durable_workflow.exceptions import (
    ActivityFailed,
    ActivityTimeoutError,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    DurableWorkflowError,
    NonDeterminismError,
    QueryCommandError,
    WorkflowCancelled,
)
from durable_workflow.text import text_of

Signature = tuple[str, str | None]

_SIGNATURE_OF_EVENT: dict[str, Callable[[dict[str, Any]], Signature]] = {
    EventType.ACTIVITY_SCHEDULED: lambda p: (
        "local_activity" if p.get("execution_mode") == "local" else "activity",
        p.get("activity_type"),
    ),
    EventType.TIMER_SCHEDULED: lambda p: ("timer", None),
    EventType.SIDE_EFFECT_RECORDED: lambda p: ("side_effect", None),
    EventType.SIGNAL_WAIT_OPENED: lambda p: ("signal", p.get("signal_name")),
    EventType.CONDITION_WAIT_OPENED: lambda p: ("condition", p.get("condition_key")),
    EventType.CHILD_WORKFLOW_SCHEDULED: lambda p: ("child", p.get("child_workflow_type")),
    EventType.MEMO_UPSERTED: lambda p: ("memo", None),
    EventType.SEARCH_ATTRIBUTES_UPSERTED: lambda p: ("search_attributes", None),
    EventType.MESSAGE_CURSOR_ADVANCED: lambda p: ("receive", p.get("stream_key")),
    EventType.MESSAGE_SENT: lambda p: ("send_message", p.get("stream_key")),
}
_EVENT_OF_KIND = {
    "activity": EventType.ACTIVITY_SCHEDULED,
    "local_activity": EventType.ACTIVITY_SCHEDULED,
    "timer": EventType.TIMER_SCHEDULED,
    "side_effect": EventType.SIDE_EFFECT_RECORDED,
    "signal": EventType.SIGNAL_WAIT_OPENED,
    "condition": EventType.CONDITION_WAIT_OPENED,
    "child": EventType.CHILD_WORKFLOW_SCHEDULED,
    "memo": EventType.MEMO_UPSERTED,
    "search_attributes": EventType.SEARCH_ATTRIBUTES_UPSERTED,
    "receive": EventType.MESSAGE_CURSOR_ADVANCED,
    "send_message": EventType.MESSAGE_SENT,
}

#: History events that record a fact the runtime itself produced, and their dedupe key.
_MARKER_KEYS: dict[str, Callable[[dict[str, Any]], Hashable]] = {
    EventType.FAILURE_HANDLED: lambda p: ("handled", p.get("sequence")),
    EventType.SIGNAL_APPLIED: lambda p: ("signal", p.get("signal_id")),
    EventType.TIMER_CANCELLED: lambda p: ("timer_cancelled", p.get("sequence")),
    EventType.CONDITION_WAIT_SATISFIED: lambda p: ("condition", p.get("sequence")),
    EventType.CONDITION_WAIT_TIMED_OUT: lambda p: ("condition", p.get("sequence")),
    EventType.UPDATE_APPLIED: lambda p: ("update_applied", p.get("update_id")),
    EventType.UPDATE_COMPLETED: lambda p: ("update_completed", p.get("update_id")),
    EventType.SELECTION_RESOLVED: lambda p: ("selection", p.get("selection_group_id")),
    EventType.SELECTION_OPERATION_CANCELLED: lambda p: ("selection_cancel", p.get("sequence")),
}


_CHILD_ERRORS = {
    EventType.CHILD_RUN_FAILED: ChildWorkflowFailed,
    EventType.CHILD_RUN_CANCELLED: ChildWorkflowCancelled,
    EventType.CHILD_RUN_TERMINATED: ChildWorkflowTerminated,
}


class _Abort(BaseException):
    """Unwinds a body after a fatal engine error; never seen by user code."""


def describe_signature(sig: Signature) -> str:
    kind, name = sig
    label = _EVENT_OF_KIND.get(kind, kind)
    return f"{label}({name})" if name else str(label)


class Future:
    __slots__ = ("done", "error", "order", "step", "value", "waiters")

    def __init__(self, step: int = 0) -> None:
        self.step = step
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.order = 0  # position in the runtime's resolution sequence
        self.waiters: list[greenlet.greenlet] = []


class WorkflowRuntime(
    StepsMixin, GroupsMixin, InboxMixin, VersionsMixin, ServicesMixin, StreamsMixin
):
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
        self._timeouts: dict[int, HistoryEvent] = {}
        self._issued: dict[int, Signature] = {}
        self._markers: set[Hashable] = set()
        self._futures: dict[int, Future] = {}
        # Failures raised into a greenlet, per greenlet: (step, exception). Once the
        # greenlet runs on without letting one escape, it was handled.
        self._thrown: dict[greenlet.greenlet, list[tuple[int, BaseException]]] = {}
        self._ready: deque[tuple[greenlet.greenlet, Any, BaseException | None]] = deque()
        self._greenlets: list[greenlet.greenlet] = []
        self._new: list[Command] = []
        self._step = 0
        self._last_sequence = 0
        self._now: dt.datetime | None = None
        self._hub: greenlet.greenlet | None = None
        self._fatal: BaseException | None = None
        self._unwinding = False
        self._query_mode = False
        # What each blocked greenlet waits on; several futures for all()/select().
        self._waiting: dict[greenlet.greenlet, tuple[list[Future], bool]] = {}
        self._resolutions = 0
        self._cancel_reason: str | None = None
        self._cancel_requested = False
        self._child_runs: dict[int, str] = {}
        # Local activities: outcomes resolve inline at their step, never by log position.
        self._local_outcomes: dict[int, HistoryEvent] = {}
        self._local_started: dict[int, int] = {}
        self._local_retried: dict[int, tuple[int, str | None]] = {}
        self.local_requests: list[Any] = []
        self._seen: list[HistoryEvent] = []
        #: Events the executor recorded after the last feed (its next feed may use
        #: them instead of reading them back).
        self.unfed: list[HistoryEvent] = []
        self._sizes = (0, 0)  # (events measured, their payload bytes)
        self._init_inbox()
        self._init_groups()
        self._init_versions()
        self._init_streams()

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
        self._run_ready()  # bodies unblocked by local outcomes found while indexing
        for event in fresh:
            self._seen.append(event)
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
            kind = event.event_type
            if kind in _MARKER_KEYS:
                self._markers.add(_MARKER_KEYS[kind](event.payload))
                continue
            if event.payload.get("local_activity"):
                self._index_local(event)
                continue
            if kind == EventType.VERSION_MARKER_RECORDED:
                change_id = str(event.payload.get("change_id"))
                self._versions[change_id] = dict(event.payload)
                self._markers.add(("version", change_id))
                continue
            if kind == EventType.ACTIVITY_CANCELLED and event.payload.get("selection_group_id"):
                self._markers.add(("sel_cancel", event.step))
            step = event.step
            if step is None or kind not in COMMAND_EVENTS:
                continue
            if kind == EventType.TIMER_SCHEDULED and event.payload.get("timer_kind"):
                self._timeouts[step] = event
            elif step in self._issued:
                self._verify(step, event)
            else:
                self._recorded[step] = event

    def _verify(self, step: int, event: HistoryEvent) -> None:
        recorded = _SIGNATURE_OF_EVENT[event.event_type](event.payload)
        if recorded != self._issued[step]:
            raise NonDeterminismError(
                step, describe_signature(recorded), describe_signature(self._issued[step])
            )

    def _apply(self, event: HistoryEvent) -> None:
        kind = event.event_type
        if kind == EventType.WORKFLOW_STARTED:
            self._now = event.recorded_at
            self.started_fingerprint = event.payload.get("workflow_definition_fingerprint")
            self._stream_cursors.update(event.payload.get("message_cursors") or {})
            args = envelope.decode(event.payload["arguments"], expected_codec=self.codec)
            self._spawn(self._main, *(args or []))
        elif kind in RESOLUTION_EVENTS:
            if not event.payload.get("local_activity"):  # local outcomes resolve inline
                self._deliver(event)
        elif kind in MESSAGE_EVENTS:
            if event.recorded_at is not None:
                self._now = event.recorded_at
            self._deliver_message(event)
        elif kind == EventType.CHILD_RUN_STARTED:
            self._child_runs[int(event.payload["sequence"])] = str(
                event.payload["child_workflow_run_id"]
            )
        elif kind == EventType.CANCEL_REQUESTED:
            if event.recorded_at is not None:
                self._now = event.recorded_at
            self._deliver_cancel(event.payload.get("reason"))
        elif kind in TERMINAL_EVENTS:
            pass

    def _deliver(self, event: HistoryEvent) -> None:
        step = event.step
        assert step is not None
        future = self._futures.get(step)
        if future is None:
            command = self._recorded.get(step)
            recorded = (
                describe_signature(_SIGNATURE_OF_EVENT[command.event_type](command.payload))
                if command is not None
                else str(event.event_type)
            )
            raise NonDeterminismError(
                step, recorded, None, "history holds a step the code never reached"
            )
        if future.done:
            return  # resolved inline, or a wait whose other branch already won
        if event.recorded_at is not None:
            self._now = event.recorded_at
        kind = event.event_type
        if kind in (EventType.ACTIVITY_COMPLETED, EventType.CHILD_RUN_COMPLETED):
            self._resolve(future, value=self._decode(event.payload.get("result")))
        elif kind == EventType.TIMER_FIRED:
            self._timer_fired(step, future)
        elif kind in _CHILD_ERRORS:
            self._resolve(future, error=failures.rebuild(_CHILD_ERRORS[kind], event.payload))
        elif kind == EventType.ACTIVITY_TIMED_OUT:
            error = failures.rebuild(ActivityTimeoutError, event.payload)
            error._timeout_kind = event.payload.get("timeout_kind")  # type: ignore[attr-defined]
            self._resolve(future, error=error)
        else:
            self._resolve(future, error=failures.rebuild(ActivityFailed, event.payload))

    def _check_unreached(self) -> None:
        if self._fatal is not None or self._ready:
            return
        unreached = sorted(s for s in self._recorded if s not in self._issued)
        if unreached:
            step = unreached[0]
            event = self._recorded[step]
            recorded = _SIGNATURE_OF_EVENT[event.event_type](event.payload)
            raise NonDeterminismError(
                step,
                describe_signature(recorded),
                None,
                "history holds a step the code never reached",
            )

    # --------------------------------------------------------------- scheduling
    def _spawn(self, fn: Callable[..., Any], *args: Any) -> greenlet.greenlet:
        gr = greenlet.greenlet(fn, parent=self._hub)
        gr.dw_runtime = self  # type: ignore[attr-defined]
        self._greenlets.append(gr)
        self._ready.append((gr, args, None))
        return gr

    def _run_ready(self) -> None:
        while True:
            while self._ready:
                gr, value, error = self._ready.popleft()
                if gr.dead:
                    continue
                if error is not None:
                    gr.throw(error)
                elif not gr:  # not started yet: ``value`` holds the call arguments
                    gr.switch(*value)
                else:
                    gr.switch(value)
                self._after_switch(gr)
                if self._fatal is not None:
                    raise self._fatal
            if not self._check_conditions():
                return

    def _after_switch(self, gr: greenlet.greenlet) -> None:
        """Record FailureHandled for failures the greenlet caught and ran on from."""
        thrown = self._thrown.pop(gr, None)
        if not thrown:
            return
        escaped = getattr(gr, "dw_error", None)
        for step, exc in thrown:
            if exc is escaped or not step:
                continue
            self._mark(
                ("handled", step),
                RecordFailureHandled(
                    step=step,
                    exception_type=text_of(
                        getattr(exc, "exception_type", "") or type(exc).__name__
                    ),
                    message=text_of(exc),
                ),
            )

    def _raise_into_body(self, step: int, error: BaseException) -> None:
        """Raise a step's failure in the current greenlet, remembering it for FailureHandled."""
        self._thrown.setdefault(greenlet.getcurrent(), []).append((step, error))
        raise error

    def _mark(self, key: Hashable, command: Command) -> None:
        """Record a fact once: history already holding ``key`` means it was recorded."""
        if key in self._markers:
            return
        self._markers.add(key)
        if not self._query_mode:
            self._new.append(command)

    def _resolve(
        self, future: Future, *, value: Any = None, error: BaseException | None = None
    ) -> None:
        self._resolutions += 1
        future.done, future.value, future.error = True, value, error
        future.order = self._resolutions
        for gr in future.waiters:
            waited, multi = self._waiting.pop(gr, ([future], False))
            for other in waited:
                if other is not future and gr in other.waiters:
                    other.waiters.remove(gr)
            if multi:
                self._ready.append((gr, None, None))  # the waiter re-inspects its futures
            else:
                self._ready.append((gr, value, error))
        future.waiters.clear()

    def _main(self, *args: Any) -> None:
        try:
            self.instance = self._factory()
            result = self.instance.handle(*args)
            if self.closed is None:
                self.closed = (
                    CancelWorkflow(reason=self._cancel_reason)
                    if self._cancel_requested
                    else CompleteWorkflow(result=self._encode(result))
                )
        except _Abort:
            return
        except ContinueAsNewRequested as request:
            if self.closed is None:
                self.closed = ContinueAsNew(
                    arguments=self._encode(list(request.arguments)),
                    message_cursors=dict(self._stream_cursors),
                )
        except greenlet.GreenletExit:
            raise
        except WorkflowCancelled:
            if self.closed is None:
                self.closed = CancelWorkflow(reason=self._cancel_reason)
        except BaseException as exc:  # the body failed: that is an outcome
            self._fail_run(exc)

    def _deliver_cancel(self, reason: str | None) -> None:
        """Raise ``WorkflowCancelled`` in the body where it waits (once)."""
        if self._cancel_requested:
            return
        self._cancel_requested, self._cancel_reason = True, reason
        main = self._greenlets[0] if self._greenlets else None
        if main is None or main.dead:
            return
        waited, _ = self._waiting.pop(main, ([], False))
        for future in waited:
            if main in future.waiters:
                future.waiters.remove(main)
            self._abandon(future)
        self._ready.append((main, None, WorkflowCancelled(reason or "the workflow was cancelled")))

    def _fail_run(self, exc: BaseException) -> None:
        greenlet.getcurrent().dw_error = exc  # type: ignore[attr-defined]
        if self.closed is None:
            self.closed = FailWorkflow(failure=failures.describe(exc))

    # ------------------------------------------------- called from body code
    def now(self) -> dt.datetime:
        assert self._now is not None
        return self._now

    def _kind_of_step(self, step: int) -> str | None:
        sig = self._issued.get(step)
        return sig[0] if sig else None

    def _next_step(self, sig: Signature) -> tuple[int, HistoryEvent | None]:
        """Claim the next step number; returns it and the event history recorded for it."""
        if self._unwinding:
            raise greenlet.GreenletExit()
        if greenlet.getcurrent() in self._restricted:
            raise QueryCommandError(
                "queries and wait predicates may only read workflow state; they cannot "
                f"call durable helpers (asked for {describe_signature(sig)})"
            )
        self._step += 1
        step = self._step
        recorded = self._recorded.get(step)
        if recorded is not None:
            recorded_sig = _SIGNATURE_OF_EVENT[recorded.event_type](recorded.payload)
            if recorded_sig != sig:
                self.fail_fatally(
                    NonDeterminismError(
                        step, describe_signature(recorded_sig), describe_signature(sig)
                    )
                )
        self._issued[step] = sig
        return step, recorded

    def _issue(self, command: Command, recorded: HistoryEvent | None) -> None:
        if recorded is None and not self._query_mode:
            self._new.append(command)

    def _wait(self, step: int, future: Future) -> Any:
        if not future.done:
            gr = greenlet.getcurrent()
            future.waiters.append(gr)
            self._waiting[gr] = ([future], False)
            assert self._hub is not None
            try:
                return self._hub.switch()
            except BaseException as exc:
                if exc is future.error:
                    self._thrown.setdefault(gr, []).append((step, exc))
                raise
        if future.error is not None:
            self._raise_into_body(step, future.error)
        return future.value

    def _wait_any(self, futures: list[Future]) -> None:
        """Block until at least one of ``futures`` is resolved (returns at once if one is)."""
        if any(f.done for f in futures):
            return
        gr = greenlet.getcurrent()
        for future in futures:
            future.waiters.append(gr)
        self._waiting[gr] = (futures, True)
        assert self._hub is not None
        self._hub.switch()

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
                with contextlib.suppress(DurableWorkflowError, _Abort):
                    gr.throw(greenlet.GreenletExit())
        self._greenlets.clear()


def current_runtime() -> WorkflowRuntime | None:
    """The runtime whose body is executing on this greenlet, if any."""
    return getattr(greenlet.getcurrent(), "dw_runtime", None)
