"""One record per durable operation the body started, each carrying its own state.

A record is created when the body claims the operation's step and lives as
long as the runtime. It owns the operation's ``Future`` and what only that
operation needs (a wait's predicate and deadline), and it
knows how an outcome recorded in history settles it (``settle``). The
``OperationTable`` finds records by step and counts the open ones of a kind
(for the structural limits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from durable_workflow.engine import failures
from durable_workflow.engine.events import EventType, HistoryEvent
from durable_workflow.engine.scheduler import Future
from durable_workflow.exceptions import (
    ActivityFailed,
    ActivityTimeoutError,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    DurableWorkflowError,
    PayloadCodecError,
    WorkflowAlreadyStartedError,
)

#: Decodes a result envelope into a declared type (None: as stored).
Decode = Callable[[Any, Any], Any]
Outcome = tuple[Any, BaseException | None]

_CHILD_ERRORS: dict[str, type[DurableWorkflowError]] = {
    EventType.CHILD_RUN_FAILED: ChildWorkflowFailed,
    EventType.CHILD_RUN_CANCELLED: ChildWorkflowCancelled,
    EventType.CHILD_RUN_TERMINATED: ChildWorkflowTerminated,
}
_COMPLETED = frozenset({EventType.ACTIVITY_COMPLETED, EventType.CHILD_RUN_COMPLETED})


class Operation:
    """A durable operation at one step: its future and how history settles it."""

    __slots__ = ("future", "name", "result_type", "step")
    #: The signature kind of the operation (``activity``, ``timer``, ...).
    kind: ClassVar[str] = ""

    def __init__(self, step: int, name: str | None = None, result_type: Any = None) -> None:
        self.step = step
        self.name = name
        self.future = Future(step)
        #: The callee's declared result type (its return annotation or ``result_type=``).
        self.result_type = result_type

    @property
    def identity(self) -> str:
        return f"{self.kind}:{self.step}"

    def settle(self, event: HistoryEvent, decode: Decode) -> Outcome:
        """The (value, error) a resolution event in history gives this operation."""
        kind = event.event_type
        payload = event.payload
        if kind in _COMPLETED:
            try:
                return decode(payload.get("result"), self.result_type), None
            except PayloadCodecError as misfit:  # raised in the body, at the call
                return None, misfit
        if kind == EventType.TIMER_FIRED:
            return None, None
        child_error = _CHILD_ERRORS.get(kind)
        if child_error is not None:
            return None, failures.rebuild(child_error, payload)
        if kind == EventType.CHILD_WORKFLOW_START_REJECTED:
            return None, WorkflowAlreadyStartedError(
                str(payload.get("outcome") or "rejected_duplicate"),
                payload.get("rejection_reason"),
                f"child workflow {payload.get('child_instance_id')!r} was not started: "
                f"the instance id is already taken",
                instance_id=payload.get("child_instance_id"),
            )
        if kind == EventType.ACTIVITY_TIMED_OUT:
            error = failures.rebuild(ActivityTimeoutError, payload)
            error._timeout_kind = payload.get("timeout_kind")  # type: ignore[attr-defined]
            return None, error
        return None, failures.rebuild(ActivityFailed, payload)


class ActivityOp(Operation):
    __slots__ = ()
    kind = "activity"


class LocalActivityOp(Operation):
    """Run by the executor between transactions; settled inline at its step."""

    __slots__ = ()
    kind = "local_activity"


class TimerOp(Operation):
    __slots__ = ()
    kind = "timer"


class ChildOp(Operation):
    """A child workflow: started (its run known, or refused), then closed."""

    __slots__ = ("instance_id", "started")
    kind = "child"

    def __init__(
        self, step: int, name: str | None, instance_id: str, result_type: Any = None
    ) -> None:
        super().__init__(step, name, result_type)
        self.instance_id = instance_id
        #: Resolves with the child's first run id once history says it started (or with
        #: the refusal, when its instance id was taken).
        self.started = Future(step)


class ExternalOp(Operation):
    """A signal or cancel request sent to another workflow; settles with its outcome."""

    __slots__ = ()

    def settle(self, event: HistoryEvent, decode: Decode) -> Outcome:
        payload = event.payload
        return {
            "outcome": payload.get("outcome"),
            "rejection_reason": payload.get("rejection_reason"),
            "command_id": payload.get("command_id"),
            "run_id": payload.get("target_run_id"),
        }, None


class ExternalSignalOp(ExternalOp):
    __slots__ = ()
    kind = "external_signal"


class ExternalCancelOp(ExternalOp):
    __slots__ = ()
    kind = "external_cancel"


class WaitOp(Operation):
    """A wait on something from outside the body, with an optional deadline."""

    __slots__ = ("timeout_pending",)

    def __init__(self, step: int, name: str | None = None) -> None:
        super().__init__(step, name)
        #: The deadline timer is scheduled and neither fired nor cancelled.
        self.timeout_pending = False


class SignalWaitOp(WaitOp):
    __slots__ = ()
    kind = "signal"


class ConditionWaitOp(WaitOp):
    __slots__ = ("predicate",)
    kind = "condition"

    def __init__(self, step: int, name: str | None, predicate: Callable[[], Any]) -> None:
        super().__init__(step, name)
        self.predicate = predicate


Op = TypeVar("Op", bound=Operation)


class OperationTable:
    """Every operation record of the run, by step and by kind."""

    def __init__(self) -> None:
        self._by_step: dict[int, Operation] = {}
        self._by_kind: dict[str, list[Operation]] = {}
        # Per kind, the operations not found done at the last count, plus those added
        # since: a count looks at these only, not at every operation of the run.
        self._maybe_open: dict[str, list[Operation]] = {}

    def add(self, op: Op) -> Op:
        self._by_step[op.step] = op
        self._by_kind.setdefault(op.kind, []).append(op)
        self._maybe_open.setdefault(op.kind, []).append(op)
        return op

    def get(self, step: int) -> Operation | None:
        return self._by_step.get(step)

    def owner_of(self, future: Future) -> Operation | None:
        """The operation whose future this is (``None`` for a branch's future)."""
        op = self._by_step.get(future.step)
        return op if op is not None and op.future is future else None

    def of_kind(self, kind: str) -> list[Operation]:
        """The operations of ``kind`` in the order the body started them."""
        return self._by_kind.get(kind, [])

    def open_count(self, kind: str) -> int:
        """Operations of ``kind`` whose future is not done. A done future stays done, so
        those found done are dropped from the ones counted next time."""
        still_open = [op for op in self._maybe_open.get(kind, ()) if not op.future.done]
        self._maybe_open[kind] = still_open
        return len(still_open)

    def children(self) -> list[ChildOp]:
        return [op for op in self.of_kind(ChildOp.kind) if isinstance(op, ChildOp)]
