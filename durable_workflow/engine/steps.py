"""The durable steps a body can take: activities, timers, side effects, waits.

Every method here runs on a body greenlet. Operations that can be members of
``all()`` / ``select()`` are built as a ``Call`` (see ``calls.py``) and run
through ``run_call``: started and waited for at once, or handed to the group
collecting them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_workflow.engine import guards
from durable_workflow.engine.calls import Call, Collector, Meta
from durable_workflow.engine.commands import (
    RecordSideEffect,
    ScheduleActivity,
    StartTimer,
    UpsertVisibility,
)
from durable_workflow.engine.core import Core
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.limits import StructuralLimits
from durable_workflow.engine.operations import (
    ActivityOp,
    LocalActivityOp,
    Operation,
    TimerOp,
)
from durable_workflow.engine.outbox import LocalRequest
from durable_workflow.engine.scheduler import Future
from durable_workflow.engine.signatures import Signature, signature_of
from durable_workflow.engine.waits import Waits, validate_condition_key
from durable_workflow.exceptions import PayloadCodecError, UnresolvedFailureError

Routing = Callable[[], tuple[dict[str, Any], str | None, str | None]]


def replays_as_itself(value: Any, replayed: Any) -> bool:
    """Whether replay returns ``value``'s own type (subclasses of the builtins are
    stored as the builtin by design; a record or enum needs its class declared)."""
    cls = type(value)
    return type(replayed) is cls or cls.__mro__[1] in (str, int, float, dict, list, bytes)


class Steps:
    """Starts durable operations for the body (see the module docstring)."""

    def __init__(
        self, core: Core, collector: Collector, limits: StructuralLimits, waits: Waits
    ) -> None:
        self._core = core
        self._collector = collector
        self._limits = limits
        self._waits = waits
        #: Memo and search attributes as of the body's position (``dw.info()``): the
        #: run's start values, then its upserts merged in.
        self.visibility: dict[str, dict[str, Any]] = {"memo": {}, "search_attributes": {}}

    def run_call(self, call: Call) -> Any:
        """Start a call now and wait for it, or hand it to the group collecting it."""
        collector = self._collector
        if collector.depth:
            collector.calls += 1
            return call
        return self._core.scheduler.wait(call.start(None))

    def replays(self, sig: Signature) -> HistoryEvent | None:
        """History's event for the next step when it is this very call, else None."""
        ledger = self._core.ledger
        recorded = ledger.recorded(ledger.step + 1)
        return recorded if recorded is not None and signature_of(recorded) == sig else None

    def encode_if_new(self, sig: Signature, encode: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The payload of the command the next step will issue, unless history holds it.

        Encoded before the step is claimed: a value the converter refuses raises at the
        call with no step taken, on the first run and on every replay alike, so the
        steps after it keep their numbers.
        """
        return {} if self.replays(sig) is not None else encode()

    def refuse_in_group(self, what: str) -> None:
        if self._collector.depth:
            raise TypeError(f"{what} cannot be a member of all() or select()")

    # ------------------------------------------------------------ activities
    def schedule_activity(
        self,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        routing: Routing,
        result_type: Any = None,
    ) -> Any:
        """``routing()`` gives (options snapshot, queue, connection); called for new steps only."""
        core = self._core

        def start(meta: Meta) -> Future:
            sig: Signature = ("activity", activity_type)
            encoded = self.encode_if_new(sig, lambda: core.payloads.encode_arguments(arguments))
            step, recorded = core.claim(sig)
            op = ActivityOp(step, activity_type, result_type)
            if recorded is None:
                if meta is None:
                    self._limits.check_pending("pending_activity_count", 1)
                options, queue, connection = routing()
                command = ScheduleActivity(
                    step=step,
                    activity_type=activity_type,
                    activity_class=activity_class,
                    arguments=encoded,
                    options=options,
                    queue=queue,
                    connection=connection,
                    group=meta,
                )
                core.outbox.issue(command, recorded)
            return core.ops.add(op).future

        return self.run_call(Call("activity", activity_type, start))

    def schedule_local_activity(
        self,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        options: dict[str, Any],
        result_type: Any = None,
    ) -> Any:
        """A local activity: the executor runs it in this process between transactions."""
        self.refuse_in_group("local_activity()")
        core = self._core
        sig: Signature = ("local_activity", activity_type)
        encoded = self.encode_if_new(sig, lambda: core.payloads.encode_arguments(arguments))
        step, recorded = core.claim(sig)
        outcome = core.ledger.local_outcome(step)
        op = core.ops.add(LocalActivityOp(step, activity_type, result_type))
        if outcome is not None:
            try:
                self.settle_local(op, outcome)
            except UnresolvedFailureError as error:  # in the body: it must not catch this
                core.fail_fatally(error)
        else:
            if recorded is None:
                self._limits.check_pending("pending_activity_count", 1)
                command = ScheduleActivity(
                    step=step,
                    activity_type=activity_type,
                    activity_class=activity_class,
                    arguments=encoded,
                    options=options,
                )
                core.outbox.issue(command, recorded)
            attempt, reason = core.ledger.local_attempt(step)
            core.outbox.request_local(
                LocalRequest(step=step, attempt_number=attempt, retry_reason=reason)
            )
        return core.scheduler.wait(op.future)

    def settle_local(self, op: Operation, event: HistoryEvent) -> None:
        """A local activity's outcome, found in history: it resolves inline, at its step."""
        core = self._core
        if event.recorded_at is not None:
            core.ledger.now = event.recorded_at
        value, error = op.settle(event, core.payloads.decode_result)
        core.scheduler.resolve(op.future, value=value, error=error)

    # ----------------------------------------------------------------- timers
    def timer(self, seconds: float) -> Any:
        core = self._core

        def start(meta: Meta) -> Future:
            step, recorded = core.claim(("timer", None))
            op = TimerOp(step)
            if recorded is None and seconds:
                self._limits.check_pending("pending_timer_count", 1)
            core.outbox.issue(StartTimer(step=step, delay_seconds=seconds, group=meta), recorded)
            core.ops.add(op)
            recorded_delay = recorded.payload.get("delay_seconds", -1) if recorded else None
            delay = seconds if recorded_delay is None else float(recorded_delay)
            if delay == 0:
                core.scheduler.resolve(op.future)
            return op.future

        return self.run_call(Call("timer", None, start))

    # --------------------------------------------------------- recorded facts
    def upsert_visibility(self, kind: str, entries: dict[str, Any]) -> None:
        """Record a memo or search-attribute upsert once; replay finds it recorded."""
        self.refuse_in_group(f"upserting {kind}")
        step, recorded = self._core.claim((kind, None))
        self._core.outbox.issue(
            UpsertVisibility(step=step, kind=kind, entries=dict(entries)), recorded
        )
        merged = {**self.visibility.get(kind, {}), **entries}  # None deletes, as stored
        self.visibility[kind] = {k: v for k, v in sorted(merged.items()) if v is not None}

    def side_effect(self, fn: Callable[[], Any], result_type: Any = None) -> Any:
        """Record ``fn()``; the first run returns the recorded value too, decoded as replay will."""
        self.refuse_in_group("side_effect()")
        core = self._core
        if core.scheduler.unwinding or core.scheduler.restricted:
            core.claim(("side_effect", None))  # refused here, before fn runs
        recorded = self.replays(("side_effect", None))
        if recorded is not None:
            core.claim(("side_effect", None))
            return core.payloads.decode(recorded.payload.get("result"), result_type, "side effect")
        # A new side effect runs and is checked before its step is claimed (see
        # encode_if_new): a refused value leaves no gap in the step numbers.
        with guards.allowed():  # its value is recorded: replay returns the same one
            value = fn()
        encoded = core.payloads.encode(value, "side effect")
        replayed = core.payloads.decode(encoded, result_type, "side effect")
        if not replays_as_itself(value, replayed):
            raise PayloadCodecError(
                "value_type_mismatch",
                f"side effect: a {type(value).__qualname__} would replay as a "
                f"{type(replayed).__qualname__}; annotate the function's return type or pass "
                f"result_type={type(value).__qualname__}",
            )
        step, recorded = core.claim(("side_effect", None))
        core.outbox.issue(RecordSideEffect(step=step, result=encoded), recorded)
        return replayed

    # ------------------------------------------------------------------ waits
    def wait_signal(self, name: str, timeout: float | None) -> Any:
        """The next signal called ``name`` (its payload), or ``None`` if the timeout wins."""
        waits = self._waits
        return self.run_call(
            Call("signal", name, lambda meta: waits.open_signal_wait(name, timeout))
        )

    def wait_condition(
        self, predicate: Callable[[], Any], timeout: float | None, key: str | None
    ) -> Any:
        """True once ``predicate()`` holds; False if the timeout wins first."""
        key = validate_condition_key(key)
        waits = self._waits

        def start(meta: Meta) -> Future:
            return waits.open_condition_wait(predicate, key, timeout)

        result = self.run_call(Call("condition", key, start))
        return result if isinstance(result, Call) else bool(result)
