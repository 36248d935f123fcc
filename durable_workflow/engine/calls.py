"""Durable calls described before they start, and the collect mode of groups.

Each durable operation is built as a ``Call`` first. Called directly, the call
starts at once (claims the next step, records its command) and the body
waits for it. Inside ``all()`` / ``select()`` member callables the runtime is
in *collect* mode (``Collector.active``): the call is returned instead, and
the group starts every member's call at consecutive steps before it suspends
once for the whole group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from durable_workflow.engine.scheduler import Future

Meta = dict[str, Any] | None


@dataclass(eq=False)
class Call:
    """One durable operation, described before it starts."""

    kind: str  # activity | timer | signal | condition | child | async
    name: str | None
    start: Callable[[Meta], Future]
    future: Future | None = None

    @property
    def identity(self) -> str:
        step = self.future.step if self.future else 0
        return f"{self.kind}:{step}"


@dataclass(eq=False)
class Group:
    """A nested ``all()`` collected inside another group."""

    members: list[Call | Group] = field(default_factory=list)

    def leaves(self) -> list[Call]:
        out: list[Call] = []
        for member in self.members:
            out.extend(member.leaves() if isinstance(member, Group) else [member])
        return out


class Collector:
    """Counts the calls made by group members while they are being collected."""

    __slots__ = ("calls", "depth")

    def __init__(self) -> None:
        self.depth = 0  # > 0 while a member callable runs
        self.calls = 0  # durable calls collected so far

    @property
    def active(self) -> bool:
        return self.depth > 0
