"""``all()`` barriers and ``select()`` first-completion groups.

Mixed into ``WorkflowRuntime``. Member callables run in collect mode (see
``steps.py``): each must make exactly one durable call (or be a nested
``all()``), which is returned instead of started. The group then starts every
leaf at consecutive steps, tagged with its group metadata, and suspends once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from durable_workflow.engine.commands import (
    CancelActivity,
    CancelTimer,
    FailWorkflow,
    RecordSelection,
)
from durable_workflow.engine.steps import Call, Group
from durable_workflow.exceptions import DurableOperationCancelled, StructuralLimitExceeded

logger = logging.getLogger("durable_workflow")

#: Structural limits log a warning from this share of their ceiling on.
WARNING_RATIO = 0.8

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import Future, WorkflowRuntime


class GroupsMixin:
    def _init_groups(self: WorkflowRuntime) -> None:
        self._collecting = 0
        self._collected = 0
        self._open_activities: set[int] = set()
        self._children: list[int] = []
        self._open_timers: list[int] = []
        self._branches = 0
        self.limits: dict[str, int] = {}

    # --------------------------------------------------------------- limits
    def _check_pending(self: WorkflowRuntime, kind: str, adding: int) -> None:
        configured = self.limits.get(kind, 0)
        if not configured:
            return
        pending = {
            "pending_activity_count": lambda: sum(
                1 for s in self._open_activities if not self._futures[s].done
            ),
            "pending_child_count": lambda: sum(
                1 for s in self._children if not self._futures[s].done
            ),
            "pending_timer_count": lambda: sum(
                1 for s in self._open_timers if not self._futures[s].done
            ),
            "command_batch_size": lambda: 0,
        }[kind]()
        if pending + adding > configured:
            self._structural_failure(kind, pending + adding, configured)
        if pending + adding >= configured * WARNING_RATIO:
            logger.warning(
                "run %s is at %s of %s %s", self.run_id, pending + adding, configured, kind
            )

    def _structural_failure(self: WorkflowRuntime, kind: str, value: int, configured: int) -> None:
        """Exceeding a structural limit fails the run; user code cannot swallow it."""
        from durable_workflow.engine import failures
        from durable_workflow.engine.runtime import _Abort

        error = StructuralLimitExceeded(kind, value, configured)
        info = failures.describe(error, category="structural_limit")
        details = {
            "structural_limit_kind": kind,
            "structural_limit_value": value,
            "structural_limit_configured": configured,
        }
        if self.closed is None:
            self.closed = FailWorkflow(failure=dataclasses.replace(info, details=details))
        raise _Abort()

    # ------------------------------------------------------------- collecting
    def _collect(self: WorkflowRuntime, members: Iterable[Any]) -> list[Call | Group]:
        calls: list[Call | Group] = []
        for member in members:
            if isinstance(member, Call | Group):
                calls.append(member)
                continue
            if not callable(member):
                raise TypeError(f"group members must be zero-argument callables, not {member!r}")
            before = self._collected
            self._collecting += 1
            try:
                result = member()
            finally:
                self._collecting -= 1
            if not isinstance(result, Call | Group) or self._collected - before != 1:
                raise TypeError(
                    "each all()/select() member must make exactly one durable call "
                    "(activity, child, timer, wait, or a nested all()) and return it, "
                    "e.g. lambda: dw.activity(Charge, order_id)"
                )
            calls.append(result)
        return calls

    def _start_leaves(self: WorkflowRuntime, calls: list[Call | Group], prefix: str) -> list[Call]:
        """Start every leaf at consecutive steps, each tagged with its group metadata."""
        tagged = _tag(calls, prefix, self._step + 1)
        leaves = [leaf for leaf, _ in tagged]
        if self._recorded.get(self._step + 1) is None:  # a new group, not a replayed one
            configured = self.limits.get("command_batch_size", 0)
            if configured and len(leaves) > configured:
                self._structural_failure("command_batch_size", len(leaves), configured)
            activities = sum(1 for leaf in leaves if leaf.kind == "activity")
            children = sum(1 for leaf in leaves if leaf.kind == "child")
            if activities:
                self._check_pending("pending_activity_count", activities)
            if children:
                self._check_pending("pending_child_count", children)
        for leaf, meta in tagged:
            leaf.future = leaf.start(meta)
        return leaves

    # -------------------------------------------------------------------- all
    def run_all(self: WorkflowRuntime, members: Iterable[Any]) -> Any:
        """Start every member, wait for all; results in input order, nested shape kept."""
        mark = self._collected
        calls = self._collect(list(members))
        if self._collecting:  # a nested all(): one member of the enclosing group
            self._collected = mark + 1
            return Group(calls)
        if not calls:
            return []
        leaves = self._start_leaves(calls, "parallel-calls")
        futures = [leaf.future for leaf in leaves if leaf.future is not None]
        while True:
            failed = [f for f in futures if f.done and f.error is not None]
            if failed:
                first = min(failed, key=lambda f: f.order)
                self._raise_into_body(first.step, first.error)  # type: ignore[arg-type]
            if all(f.done for f in futures):
                return _shape(calls)
            self._wait_any([f for f in futures if not f.done])

    # --------------------------------------------------------------- branches
    def start_branch(self: WorkflowRuntime, callback: Callable[[], Any]) -> Future:
        """Run ``callback`` on its own greenlet; the future resolves with its outcome."""
        from durable_workflow.engine.runtime import Future, _Abort

        future = Future(0)
        self._branches += 1

        def run() -> None:
            import greenlet

            try:
                value = callback()
            except (_Abort, greenlet.GreenletExit):
                raise
            except BaseException as exc:
                greenlet.getcurrent().dw_error = exc  # type: ignore[attr-defined]
                self._resolve(future, error=exc)
                return
            self._resolve(future, value=value)

        self._spawn(run)
        return future

    # ----------------------------------------------------------------- select
    def run_select(self: WorkflowRuntime, members: Any) -> SelectionResult:
        """Start every member; return as soon as the first one completes (or fails)."""
        if self._collecting:
            raise TypeError("select() cannot be a member of another group")
        if isinstance(members, dict):
            keys = list(members)
            for key in keys:
                if not ((isinstance(key, str) and key) or (isinstance(key, int) and key >= 0)):
                    raise TypeError(
                        f"select() keys must be non-empty strings or ints >= 0: {key!r}"
                    )
            items = list(members.values())
        else:
            items = list(members)
            keys = list(range(len(items)))
        if not items:
            raise ValueError("select() needs at least one member")
        calls = self._collect(items)
        leaves = self._start_leaves(calls, "select-calls")
        group_id = f"select-calls:{leaves[0].future.step}:{len(leaves)}"  # type: ignore[union-attr]
        handles = {
            key: OperationHandle(self, key, index, call, group_id)
            for index, (key, call) in enumerate(zip(keys, calls, strict=True))
        }
        while True:
            done = [h for h in handles.values() if h.done]
            if done:
                winner = min(done, key=lambda h: h.order)
                break
            self._wait_any([f for h in handles.values() for f in h.futures if not f.done])
        self._mark(
            ("selection", group_id),
            RecordSelection(
                "SelectionResolved",
                {
                    "sequence": winner.futures[0].step,
                    "selection_group_id": group_id,
                    "selection_group_size": len(leaves),
                    "member_key": winner.key,
                    "member_index": winner.index,
                    "operation_kind": winner.kind,
                    "operation_identity": winner.identity,
                    "outcome": "failed" if winner.error is not None else "completed",
                },
            ),
        )
        return SelectionResult(winner=winner, handles=handles)


class OperationHandle:
    """One member of a select(): wait for it later, or cancel it."""

    def __init__(
        self, runtime: WorkflowRuntime, key: Any, index: int, call: Call | Group, group_id: str
    ) -> None:
        self._runtime = runtime
        self.key = key
        self.index = index
        self._call = call
        self._group_id = group_id
        self.futures = [
            leaf.future for leaf in (call.leaves() if isinstance(call, Group) else [call])
        ]
        self.kind = "group" if isinstance(call, Group) else call.kind

    @property
    def identity(self) -> str:
        first = self.futures[0]
        if isinstance(self._call, Group):
            return f"group:{first.step}:{len(self.futures)}"  # type: ignore[union-attr]
        return f"{self.kind}:{first.step}"  # type: ignore[union-attr]

    @property
    def done(self) -> bool:
        return self.error is not None or all(f.done for f in self.futures)  # type: ignore[union-attr]

    @property
    def error(self) -> BaseException | None:
        failed = [f for f in self.futures if f.done and f.error is not None]  # type: ignore[union-attr]
        return min(failed, key=lambda f: f.order).error if failed else None  # type: ignore[union-attr]

    @property
    def order(self) -> int:
        if self.error is not None:
            return min(f.order for f in self.futures if f.done and f.error is not None)  # type: ignore[union-attr]
        return max(f.order for f in self.futures)  # type: ignore[union-attr]

    def wait(self) -> Any:
        """The member's result (raises its failure, or ``DurableOperationCancelled``)."""
        runtime = self._runtime
        while not self.done:
            runtime._wait_any([f for f in self.futures if not f.done])  # type: ignore[union-attr]
        error = self.error
        if error is not None:
            failed = min(
                (f for f in self.futures if f.done and f.error is not None),  # type: ignore[union-attr]
                key=lambda f: f.order,
            )
            runtime._raise_into_body(failed.step, error)
        return _shape([self._call])[0]

    def cancel(self) -> None:
        """Ask for the member to be cancelled; a no-op if it already finished."""
        runtime = self._runtime
        for future in self.futures:
            if future is None or future.done:
                continue
            step = future.step
            selection = {
                "selection_group_id": self._group_id,
                "member_key": self.key,
                "member_index": self.index,
                "operation_kind": self.kind,
                "operation_identity": self.identity,
            }
            kind = runtime._kind_of_step(step)
            if kind == "activity":
                runtime._mark(("sel_cancel", step), CancelActivity(step=step, selection=selection))
            elif kind == "timer" or step in runtime._timeout_pending:
                runtime._timeout_pending.discard(step)
                runtime._mark(("timer_cancelled", step), CancelTimer(step=step))
            runtime._mark(
                ("selection_cancel", step),
                RecordSelection("SelectionOperationCancelled", {"sequence": step, **selection}),
            )
            runtime._conditions.pop(step, None)
            runtime._resolve(
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


def _tag(calls: list[Call | Group], prefix: str, base: int) -> list[tuple[Call, dict[str, Any]]]:
    """Pair each leaf with its group metadata; nested groups extend the leaf's path."""
    leaves = Group(list(calls)).leaves()
    kinds = {leaf.kind for leaf in leaves}
    top = {
        "group_id": f"{prefix}:{base}:{len(leaves)}",
        "kind": next(iter(kinds)) if len(kinds) == 1 else "mixed",
        "base": base,
        "size": len(leaves),
    }
    out: list[tuple[Call, dict[str, Any]]] = []

    def walk(members: list[Call | Group], path: list[str], start: int) -> int:
        position = start
        for member in members:
            if isinstance(member, Group):
                size = len(member.leaves())
                position = walk(member.members, [*path, f"group:{position}:{size}"], position)
                continue
            out.append(
                (
                    member,
                    {
                        "parallel_group_id": top["group_id"],
                        "parallel_group_kind": top["kind"],
                        "parallel_group_base_sequence": base,
                        "parallel_group_size": top["size"],
                        "parallel_group_index": position - base,
                        "parallel_group_path": path,
                    },
                )
            )
            position += 1
        return position

    walk(list(calls), [str(top["group_id"])], base)
    return out


def _shape(calls: list[Call | Group]) -> list[Any]:
    out: list[Any] = []
    for call in calls:
        if isinstance(call, Group):
            out.append(_shape(call.members))
        else:
            out.append(call.future.value if call.future else None)
    return out


Callback = Callable[[], Any]
