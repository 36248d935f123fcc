"""The shape every doctor check returns, and the context checks share."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any, Literal

from durable_workflow import clock

Status = Literal["ok", "warning", "error"]
Category = Literal["correctness", "acceleration"]

OK: Status = "ok"
WARNING: Status = "warning"
ERROR: Status = "error"

_RANK = {OK: 0, WARNING: 1, ERROR: 2}


def worst(statuses: list[Status] | tuple[Status, ...]) -> Status:
    """The most severe of ``statuses`` (``ok`` for none)."""
    return max(statuses, key=_RANK.__getitem__, default=OK)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One finding: what was checked, how it stands, and what to do about it."""

    id: str
    title: str
    status: Status
    message: str
    next_step: str | None = None
    category: Category = "correctness"
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "category": self.category,
            "message": self.message,
            "next_step": self.next_step,
            "details": self.details,
        }


@dataclasses.dataclass
class DoctorContext:
    """What checks read besides the database; tests swap any of it.

    ``stuck_after_seconds`` is how long a due ``ready`` task (or a due timer)
    may wait before the doctor calls it stuck; ``None`` derives it from the
    repair settings.
    """

    now: dt.datetime = dataclasses.field(default_factory=clock.now)
    stuck_after_seconds: float | None = None
    broker_timeout: float = 2.0
    inspect_timeout: float = 1.0
    #: Override for the migration plan (a list of (migration, backwards) pairs).
    migration_plan: Callable[[], list[Any]] | None = None
    #: Override for ``app.control.inspect().active_queues()`` per connection.
    active_queues: Callable[[str | None], dict[str, list[dict[str, Any]]] | None] | None = None
    results: dict[str, CheckResult] = dataclasses.field(default_factory=dict)
    _blocked: tuple[str, ...] | None = dataclasses.field(default=None, repr=False)

    def blocked_markers(self) -> tuple[str, ...]:
        """Compatibility markers of ready tasks that no live worker supports, read once
        per run of the doctor (two checks leave their tasks out)."""
        from durable_workflow.operations.compatibility import blocked_markers

        if self._blocked is None:
            self._blocked = blocked_markers(now=self.now)[0]
        return self._blocked

    def stuck_threshold(self) -> float:
        from durable_workflow.conf import get_settings

        if self.stuck_after_seconds is not None:
            return float(self.stuck_after_seconds)
        settings = get_settings()
        return max(60.0, 10.0 * settings.REDISPATCH_AFTER_SECONDS)


Check = Callable[[DoctorContext], CheckResult]
