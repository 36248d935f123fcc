"""What one workflow task produces: new commands, the run's closing, local attempts.

The executor reads the outbox after ``feed``: ``take_commands()`` (commands
history does not hold yet, in issue order), ``closed`` (how the body ended, if
it did) and ``local_requests`` (local activity attempts to run before the body
can go on). In query mode nothing is produced.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from durable_workflow.engine import failures
from durable_workflow.engine.commands import CloseCommand, Command, FailWorkflow
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.ledger import DeterminismLedger


@dataclass(frozen=True)
class LocalRequest:
    """A local activity attempt the executor must run before the body can go on."""

    step: int
    attempt_number: int
    retry_reason: str | None


class ContinueAsNewRequested(BaseException):
    """Raised by ``continue_as_new()`` to end the body; never seen by user code."""

    def __init__(self, arguments: dict[str, Any]):
        self.arguments = arguments  # the next run's arguments, already encoded
        super().__init__("continue as new")


class Outbox:
    """Collects the products of a task (see the module docstring)."""

    def __init__(self, ledger: DeterminismLedger) -> None:
        self._ledger = ledger
        self._commands: list[Command] = []
        self.closed: CloseCommand | None = None
        self.local_requests: list[LocalRequest] = []
        #: Replay without producing anything (queries and update validators).
        self.query_mode = False
        #: The body waits for an outcome the executor records with these commands (a
        #: child's start, a signal's outcome): feed the events back before the task ends.
        self.refeed = False

    def issue(self, command: Command, recorded: HistoryEvent | None) -> None:
        """Produce ``command`` unless history already recorded its step."""
        if recorded is None and not self.query_mode:
            self._commands.append(command)

    def mark(self, key: Hashable, command: Command) -> None:
        """Record a fact once: history already holding ``key`` means it was recorded."""
        if self._ledger.first_time(key) and not self.query_mode:
            self._commands.append(command)

    def request_local(self, request: LocalRequest) -> None:
        if not self.query_mode:
            self.local_requests.append(request)

    def take_commands(self) -> list[Command]:
        """The new commands issued since the last call, in issue order."""
        new, self._commands = self._commands, []
        return new

    def take_refeed(self) -> bool:
        """Whether the commands just taken need their events fed back (and reset it)."""
        refeed, self.refeed = self.refeed, False
        return refeed

    def close(self, command: CloseCommand) -> None:
        """The run ends with ``command`` unless it already ended."""
        if self.closed is None:
            self.closed = command

    def fail(self, error: BaseException) -> None:
        """The body failed with ``error``: that is the run's outcome (the first one wins)."""
        if self.closed is None:
            self.closed = FailWorkflow(failure=failures.describe(error))
