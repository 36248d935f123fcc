"""``all()`` barriers, ``select()`` first-completion groups, and branches.

Member callables run in collect mode (see ``calls.py``): each must make
exactly one durable call (or be a nested ``all()``), which is returned instead
of started. The group then starts every leaf at consecutive steps, tagged with
its group metadata, and suspends once. A branch (``run_async``) runs a
callback on a greenlet of its own; its future resolves with the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import greenlet

from durable_workflow.engine.calls import Call, Collector, Group
from durable_workflow.engine.commands import RecordSelection
from durable_workflow.engine.core import Core
from durable_workflow.engine.limits import StructuralLimits
from durable_workflow.engine.scheduler import Abort, Future
from durable_workflow.engine.selection import OperationHandle, SelectionResult, shape
from durable_workflow.engine.waits import Waits

_MEMBER_RULE = (
    "each all()/select() member must make exactly one durable call "
    "(activity, child, timer, wait, or a nested all()) and return it, "
    "e.g. lambda: dw.activity(Charge, order_id)"
)


class Groups:
    """Runs ``all()``, ``select()`` and branches for the body (see the module docstring)."""

    def __init__(
        self, core: Core, collector: Collector, limits: StructuralLimits, waits: Waits
    ) -> None:
        self._core = core
        self._collector = collector
        self._limits = limits
        self._waits = waits
        self._waiting_selects = 0  # selects over started operations only, so far

    # ------------------------------------------------------------- collecting
    def _collect(self, members: Iterable[Any]) -> list[Call | Group]:
        collector = self._collector
        calls: list[Call | Group] = []
        for member in members:
            if isinstance(member, Call | Group):
                calls.append(member)
                continue
            if not callable(member):
                raise TypeError(f"group members must be zero-argument callables, not {member!r}")
            before = collector.calls
            collector.depth += 1
            try:
                result = member()
            finally:
                collector.depth -= 1
            if not isinstance(result, Call | Group) or collector.calls - before != 1:
                raise TypeError(_MEMBER_RULE)
            calls.append(result)
        return calls

    def _start_leaves(self, calls: list[Call | Group], prefix: str) -> list[Call]:
        """Start every leaf at consecutive steps, each tagged with its group metadata.

        A leaf that started before the group (a child handle's result) is only waited
        for: it takes no step and gets no metadata. Returns every leaf.
        """
        base = self._core.ledger.step + 1
        tagged = _tag(calls, prefix, base)
        leaves = [leaf for leaf, _ in tagged]
        if leaves and self._core.ledger.recorded(base) is None:  # a new group, not replayed
            self._limits.check_batch(len(leaves))
            activities = sum(1 for leaf in leaves if leaf.kind == "activity")
            children = sum(1 for leaf in leaves if leaf.kind == "child")
            if activities:
                self._limits.check_pending("pending_activity_count", activities)
            if children:
                self._limits.check_pending("pending_child_count", children)
        for leaf, meta in tagged:
            leaf.future = leaf.start(meta)
        return Group(list(calls)).leaves()

    # -------------------------------------------------------------------- all
    def run_all(self, members: Iterable[Any]) -> Any:
        """Start every member, wait for all; results in input order, nested shape kept."""
        collector = self._collector
        mark = collector.calls
        calls = self._collect(list(members))
        if collector.depth:  # a nested all(): one member of the enclosing group
            collector.calls = mark + 1
            return Group(calls)
        if not calls:
            return []
        leaves = self._start_leaves(calls, "parallel-calls")
        futures = [leaf.future for leaf in leaves if leaf.future is not None]
        scheduler = self._core.scheduler
        while True:
            failed = [f for f in futures if f.done and f.error is not None]
            if failed:
                first = min(failed, key=lambda f: f.order)
                assert first.error is not None
                scheduler.raise_into_body(first.step, first.error)
            if all(f.done for f in futures):
                return shape(calls)
            scheduler.wait_any([f for f in futures if not f.done])

    # --------------------------------------------------------------- branches
    def start_branch(self, callback: Callable[[], Any]) -> Future:
        """Run ``callback`` on its own greenlet; the future resolves with its outcome."""
        future = Future(0)
        scheduler = self._core.scheduler

        def run() -> None:
            try:
                value = callback()
            except (Abort, greenlet.GreenletExit):
                raise
            except BaseException as exc:
                scheduler.escaped(exc)
                scheduler.resolve(future, error=exc)
                return
            scheduler.resolve(future, value=value)

        scheduler.spawn(run)
        return future

    # ----------------------------------------------------------------- select
    def run_select(self, members: Any) -> SelectionResult:
        """Start every member; return as soon as the first one completes (or fails)."""
        if self._collector.depth:
            raise TypeError("select() cannot be a member of another group")
        keys, items = _keyed(members)
        calls = self._collect(items)
        fresh = [leaf for leaf in Group(list(calls)).leaves() if leaf.future is None]
        leaves = self._start_leaves(calls, "select-calls")
        if fresh:
            assert fresh[0].future is not None
            group_id = f"select-calls:{fresh[0].future.step}:{len(leaves)}"
        else:  # only operations started earlier: no step of its own to name it by
            self._waiting_selects += 1
            group_id = f"select-started:{self._core.ledger.step}:{self._waiting_selects}"
        handles = {
            key: OperationHandle(self._core, self._waits, key, index, call, group_id)
            for index, (key, call) in enumerate(zip(keys, calls, strict=True))
        }
        while True:
            done = [h for h in handles.values() if h.done]
            if done:
                winner = min(done, key=lambda h: h.order)
                break
            self._core.scheduler.wait_any(
                [f for h in handles.values() for f in h.futures if not f.done]
            )
        payload = {
            "sequence": winner.futures[0].step,
            "selection_group_id": group_id,
            "selection_group_size": len(leaves),
            "member_key": winner.key,
            "member_index": winner.index,
            "operation_kind": winner.kind,
            "operation_identity": winner.identity,
            "outcome": "failed" if winner.error is not None else "completed",
        }
        self._core.outbox.mark(
            ("selection", group_id), RecordSelection("SelectionResolved", payload)
        )
        return SelectionResult(winner=winner, handles=handles)


def _keyed(members: Any) -> tuple[list[Any], list[Any]]:
    """select()'s members as (keys, callables): a dict's keys, or positions."""
    if isinstance(members, dict):
        keys = list(members)
        for key in keys:
            if not ((isinstance(key, str) and key) or (isinstance(key, int) and key >= 0)):
                raise TypeError(f"select() keys must be non-empty strings or ints >= 0: {key!r}")
        items = list(members.values())
    else:
        items = list(members)
        keys = list(range(len(items)))
    if not items:
        raise ValueError("select() needs at least one member")
    return keys, items


def _tag(calls: list[Call | Group], prefix: str, base: int) -> list[tuple[Call, dict[str, Any]]]:
    """Pair each leaf with its group metadata; nested groups extend the leaf's path."""
    leaves = [leaf for leaf in Group(list(calls)).leaves() if leaf.future is None]
    kinds = {leaf.kind for leaf in leaves}
    group_id = f"{prefix}:{base}:{len(leaves)}"
    common = {
        "parallel_group_id": group_id,
        "parallel_group_kind": next(iter(kinds)) if len(kinds) == 1 else "mixed",
        "parallel_group_base_sequence": base,
        "parallel_group_size": len(leaves),
    }
    out: list[tuple[Call, dict[str, Any]]] = []

    def walk(members: list[Call | Group], path: list[str], start: int) -> int:
        position = start
        for member in members:
            if isinstance(member, Group):
                size = sum(1 for leaf in member.leaves() if leaf.future is None)
                position = walk(member.members, [*path, f"group:{position}:{size}"], position)
                continue
            if member.future is not None:
                continue  # started before the group: only waited for
            meta = {**common, "parallel_group_index": position - base, "parallel_group_path": path}
            out.append((member, meta))
            position += 1
        return position

    walk(list(calls), [group_id], base)
    return out
