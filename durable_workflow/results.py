"""What client commands return: plain, frozen result objects."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any


@dataclasses.dataclass(frozen=True)
class StartResult:
    """What happened to a start command."""

    accepted: bool
    outcome: str
    command_id: str
    instance_id: str
    run_id: str | None
    rejection_reason: str | None = None
    #: For reason ``deduplication_id_in_use``: the instance whose open run holds the id.
    holder_instance_id: str | None = None

    @property
    def rejected(self) -> bool:
        return not self.accepted


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What happened to a signal, cancel, terminate or repair command."""

    accepted: bool
    outcome: str
    command_id: str
    instance_id: str
    run_id: str | None
    rejection_reason: str | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    target_scope: str = "instance"
    reason: str | None = None

    @property
    def rejected(self) -> bool:
        return not self.accepted

    @property
    def validation_errors(self) -> dict[str, list[str]]:
        return dict(self.metadata.get("validation_errors") or {})


@dataclasses.dataclass(frozen=True)
class SignalWithStartResult:
    start: StartResult | None
    signal: CommandResult


@dataclasses.dataclass(frozen=True)
class UpdateResult:
    """The lifecycle of one update, as far as the caller has seen it."""

    accepted: bool
    update_status: str
    update_id: str | None
    update_name: str
    command_id: str
    result: Any = None
    failure_message: str | None = None
    rejection_reason: str | None = None
    outcome: str | None = None
    wait_timed_out: bool = False
    closed_at: dt.datetime | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.update_status == "completed"

    @property
    def rejected(self) -> bool:
        return self.update_status == "rejected"

    @property
    def failed(self) -> bool:
        return self.update_status == "failed"

    @property
    def validation_errors(self) -> dict[str, list[str]]:
        return dict(self.metadata.get("validation_errors") or {})


@dataclasses.dataclass(frozen=True)
class UpdateWithStartResult:
    """What update-with-start did: the start (``None`` when the update was refused before
    any start) and the update (``None`` when the start was refused)."""

    start: StartResult | None
    update: UpdateResult | None

    @property
    def accepted(self) -> bool:
        return self.update is not None and self.update.accepted


@dataclasses.dataclass(frozen=True)
class ResetResult:
    """What ``WorkflowStub.reset()`` / ``fork()`` did (or, with ``dry_run``, would do).

    ``reset_point`` is what both runs record: the point's ``kind``, the ``event`` it
    names, the ``cut`` (first old sequence not kept), ``kept_events``,
    ``reissued_steps`` and ``reapplied_signals``.
    """

    instance_id: str
    #: The new run (``None`` for a dry run).
    run_id: str | None
    #: The run the new one starts from.
    reset_from_run_id: str
    reset_point: dict[str, Any]
    #: ``reset`` or ``fork``.
    kind: str
    dry_run: bool = False
    #: The old run was open and was terminated (reason ``reset``).
    terminated_old_run: bool = False
    command_id: str | None = None
