"""What the code under test dispatched, read back from the durable rows.

Activity executions, signals and updates are rows the executor writes
whatever drove it (fake mode, the ``inline`` runner, a real worker), so the
assertions read those rather than a list kept on the side. In fake mode only
rows created since ``WorkflowStub.fake()`` count (ids are time-ordered).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.converter import from_plain


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """One activity call, one signal or one update, with decoded arguments."""

    name: str
    instance_id: str
    arguments: list[Any]
    status: str
    rejection_reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.status != "rejected"

    def describe(self) -> str:
        if not self.accepted:  # the arguments of a rejected message are not kept
            reason = self.rejection_reason or "rejected"
            return f"{self.name}(...) to {self.instance_id!r} [rejected: {reason}]"
        args = ", ".join(repr(a) for a in self.arguments)
        return f"{self.name}({args}) to {self.instance_id!r} [{self.status}]"


def _since() -> uuid.UUID | None:
    from durable_workflow.testing import fake

    current = fake.active()
    return current.since if current is not None else None


def _decode(value: Any) -> list[Any]:
    """Arguments as assertion callbacks see them: through the data converter (a
    datetime is a datetime), records as dicts since no receiver declares a class."""
    if not value:
        return []
    decoded = from_plain(envelope.decode(value))
    return list(decoded) if isinstance(decoded, list | tuple) else [decoded]


def activities() -> list[Dispatch]:
    """Every activity execution scheduled (a retried execution counts once)."""
    from durable_workflow.models import ActivityExecution

    rows = ActivityExecution.objects.select_related("run")
    since = _since()
    if since is not None:
        rows = rows.filter(id__gte=since)
    return [
        Dispatch(
            name=row.activity_type,
            instance_id=row.run.instance_id,
            arguments=_decode(row.arguments),
            status=row.status,
        )
        for row in rows.order_by("id")
    ]


def signals() -> list[Dispatch]:
    """Every signal sent through the client, accepted or rejected."""
    from durable_workflow.models import WorkflowSignal

    rows = WorkflowSignal.objects.all()
    since = _since()
    if since is not None:
        rows = rows.filter(id__gte=since)
    return [
        Dispatch(
            name=row.signal_name,
            instance_id=row.instance_id,
            arguments=_decode(row.arguments),
            status=row.status,
            rejection_reason=row.rejection_reason,
        )
        for row in rows.order_by("id")
    ]


def updates() -> list[Dispatch]:
    """Every update submitted through the client, accepted or rejected."""
    from durable_workflow.models import WorkflowUpdate

    rows = WorkflowUpdate.objects.all()
    since = _since()
    if since is not None:
        rows = rows.filter(id__gte=since)
    return [
        Dispatch(
            name=row.update_name,
            instance_id=row.instance_id,
            arguments=_decode(row.arguments),
            status=row.status,
            rejection_reason=row.rejection_reason,
        )
        for row in rows.order_by("id")
    ]
