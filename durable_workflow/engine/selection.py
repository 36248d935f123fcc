"""What ``select()`` hands the body: the winner, and a handle for every member.

A member's handle can be waited on later (its result, or its failure raised)
or cancelled: cancelling records the cancellation once (an activity's
``ActivityCancelled``, a timer's or a wait deadline's ``TimerCancelled``, and
``SelectionOperationCancelled``) and fails the member with
``DurableOperationCancelled``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from durable_workflow.engine.calls import Call, Group
from durable_workflow.engine.commands import CancelActivity, CancelTimer, RecordSelection
from durable_workflow.engine.core import Core
from durable_workflow.engine.operations import ActivityOp, TimerOp, WaitOp
from durable_workflow.engine.scheduler import Future
from durable_workflow.engine.waits import Waits
from durable_workflow.exceptions import DurableOperationCancelled


def leaf_futures(call: Call | Group) -> list[Future]:
    """The futures of a started call's leaves (every leaf of a group has started)."""
    leaves = call.leaves() if isinstance(call, Group) else [call]
    return [leaf.future for leaf in leaves if leaf.future is not None]


def shape(calls: list[Call | Group]) -> list[Any]:
    """The results of finished calls, nested as the calls were."""
    out: list[Any] = []
    for call in calls:
        if isinstance(call, Group):
            out.append(shape(call.members))
        else:
            out.append(call.future.value if call.future else None)
    return out


class OperationHandle:
    """One member of a select(): wait for it later, or cancel it."""

    def __init__(
        self, core: Core, waits: Waits, key: Any, index: int, call: Call | Group, group_id: str
    ) -> None:
        self._core = core
        self._waits = waits
        self.key = key
        self.index = index
        self._call = call
        self._group_id = group_id
        self.futures = leaf_futures(call)
        self.kind = "group" if isinstance(call, Group) else call.kind

    @property
    def identity(self) -> str:
        first = self.futures[0]
        if isinstance(self._call, Group):
            return f"group:{first.step}:{len(self.futures)}"
        return f"{self.kind}:{first.step}"

    @property
    def done(self) -> bool:
        return self.error is not None or all(f.done for f in self.futures)

    def _first_failed(self) -> Future | None:
        failed = [f for f in self.futures if f.done and f.error is not None]
        return min(failed, key=lambda f: f.order) if failed else None

    @property
    def error(self) -> BaseException | None:
        failed = self._first_failed()
        return failed.error if failed is not None else None

    @property
    def order(self) -> int:
        failed = self._first_failed()
        if failed is not None:
            return failed.order
        return max(f.order for f in self.futures)

    def wait(self) -> Any:
        """The member's result (raises its failure, or ``DurableOperationCancelled``)."""
        scheduler = self._core.scheduler
        while not self.done:
            scheduler.wait_any([f for f in self.futures if not f.done])
        failed = self._first_failed()
        if failed is not None and failed.error is not None:
            scheduler.raise_into_body(failed.step, failed.error)
        return shape([self._call])[0]

    def cancel(self) -> None:
        """Ask for the member to be cancelled; a no-op if it already finished."""
        for future in self.futures:
            if not future.done:
                self._cancel(future)

    def _cancel(self, future: Future) -> None:
        core = self._core
        step = future.step
        selection = {
            "selection_group_id": self._group_id,
            "member_key": self.key,
            "member_index": self.index,
            "operation_kind": self.kind,
            "operation_identity": self.identity,
        }
        op = core.ops.owner_of(future)
        if isinstance(op, ActivityOp):
            core.outbox.mark(("sel_cancel", step), CancelActivity(step=step, selection=selection))
        elif isinstance(op, TimerOp) or (isinstance(op, WaitOp) and op.timeout_pending):
            if isinstance(op, WaitOp):
                op.timeout_pending = False
            core.outbox.mark(("timer_cancelled", step), CancelTimer(step=step))
        core.outbox.mark(
            ("selection_cancel", step),
            RecordSelection("SelectionOperationCancelled", {"sequence": step, **selection}),
        )
        if isinstance(op, WaitOp):
            self._waits.forget(op)
        core.scheduler.resolve(
            future,
            error=DurableOperationCancelled(
                f"Durable {self.kind} operation [{self.identity}] was cancelled.", **selection
            ),
        )


@dataclasses.dataclass
class SelectionResult:
    """What select() returns: the winning member and a handle for every member."""

    winner: OperationHandle
    handles: dict[Any, OperationHandle]

    @property
    def key(self) -> Any:
        return self.winner.key

    @property
    def index(self) -> int:
        return self.winner.index

    @property
    def kind(self) -> str:
        return self.winner.kind

    @property
    def identity(self) -> str:
        return self.winner.identity

    def result(self) -> Any:
        """The winner's value, or its failure raised."""
        return self.winner.wait()

    def remaining(self) -> list[OperationHandle]:
        return [h for h in self.handles.values() if h is not self.winner]
