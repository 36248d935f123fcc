"""The errors a caller of the client sees: a command refused, an update, query or
signal that failed, a run that closed without a result or is parked on a failed
workflow task, and a wait that ran out.

``durable_workflow.exceptions`` re-exports every one of them, and each keeps the
dotted path ``durable_workflow.exceptions.<Name>`` it had before it moved here: a
failure is recorded under that path (``engine/exception_types.py``), so one that an
activity or a body raised replays as the same class.
"""

from __future__ import annotations

from typing import Any, ClassVar

from durable_workflow.exceptions.base import DurableWorkflowError


class MessageFailedError(DurableWorkflowError):
    """Shared shape of the update, query and signal errors (docs/reference/errors.md).

    ``rejected`` says which of the two ways it failed: True when the message was
    refused before any handler ran (unknown name, invalid arguments, a validator
    said no, the run is closed), False when the handler ran and raised; then
    ``exception_type``, ``exception_class``, ``failure_message`` and ``traceback``
    describe what it raised. ``reason`` is the machine-readable code, ``metadata``
    holds e.g. ``validation_errors``.
    """

    rejected: ClassVar[bool] = False
    kind: ClassVar[str] = "message"

    def __init__(
        self,
        reason: str,
        message: str = "",
        *,
        name: str = "",
        outcome: str | None = None,
        exception_type: str = "",
        exception_class: str = "",
        failure_message: str = "",
        traceback: str = "",
        **metadata: Any,
    ):
        self.reason: str | None = reason
        self.outcome = outcome or reason
        self.name = name
        self.exception_type = exception_type
        self.exception_class = exception_class
        self.failure_message = failure_message
        self.traceback = traceback
        self.metadata = metadata
        Exception.__init__(self, message or f"{self.kind} {name!r} failed: {reason}")

    @property
    def validation_errors(self) -> dict[str, list[str]]:
        return dict(self.metadata.get("validation_errors") or {})


class QueryFailedError(MessageFailedError):
    """A query could not be answered: refused (``QueryRejectedError``) or it raised
    (``QueryHandlerFailedError``)."""

    kind = "query"


class QueryRejectedError(QueryFailedError):
    """The query was refused: unknown name, invalid arguments, run not started or
    its workflow class unavailable."""

    rejected = True


class QueryHandlerFailedError(QueryFailedError):
    """The query method raised."""


class WorkflowParkedError(DurableWorkflowError):
    """The run is parked on a failed workflow task (a bug in the body, a replay that no
    longer matches, a task that kept crashing its worker): it stays open and will not
    move until the code is fixed, deployed and the run repaired.

    ``exception_type``, ``message`` and ``traceback`` are those of the task's failure,
    ``since`` when it was recorded.
    """

    def __init__(
        self,
        *,
        instance_id: str,
        run_id: str | None,
        exception_type: str,
        message: str,
        traceback: str,
        since: Any,
    ) -> None:
        self.instance_id = instance_id
        self.run_id = run_id
        self.exception_type = exception_type
        self.message = message
        self.traceback = traceback
        self.since = since
        super().__init__(
            f"workflow {instance_id!r} is parked on a failed workflow task: "
            f"{exception_type}: {message}"
        )


class CommandRejected(DurableWorkflowError):
    """A client command (start, signal, ...) was durably rejected."""

    def __init__(self, outcome: str, reason: str | None, message: str = "", **metadata: Any):
        self.outcome = outcome
        self.reason = reason
        self.metadata = metadata
        super().__init__(message or f"command rejected: {outcome} ({reason})")


class UpdateFailedError(MessageFailedError):
    """An update gave no result: refused before it ran (``UpdateRejectedError``, e.g.
    by its validator) or its handler raised (``UpdateHandlerFailedError``); the run
    itself stays open either way. ``update_id`` names the stored update, when any."""

    kind = "update"

    @property
    def update_id(self) -> str | None:
        value = self.metadata.get("update_id")
        return None if value is None else str(value)


class UpdateRejectedError(UpdateFailedError, CommandRejected):
    """The update was refused before its handler ran (its validator said no, unknown
    name, invalid arguments, the run is closed). Also a ``CommandRejected``."""

    rejected = True


class UpdateHandlerFailedError(UpdateFailedError):
    """The update was accepted and its handler raised."""


class SignalFailedError(MessageFailedError):
    """A signal was not delivered. Signals are fire-and-forget: a handler that raises
    fails the run (``WorkflowFailedError`` from ``result()``), so the only way a
    sender sees a signal fail is ``SignalRejectedError``."""

    kind = "signal"


class SignalRejectedError(SignalFailedError, CommandRejected):
    """The signal was refused (undeclared name, invalid arguments, the run is closed).
    Also a ``CommandRejected``."""

    rejected = True


class UpdateWaitTimedOutError(DurableWorkflowError, TimeoutError):
    """An update was accepted but did not finish within the wait budget."""


class WorkflowClosedError(DurableWorkflowError):
    """``WorkflowStub.result()`` found the run closed without a result.

    ``status`` and ``closed_reason`` are the run's; subclasses say how it closed.
    """

    def __init__(
        self,
        message: str,
        *,
        instance_id: str,
        run_id: str | None,
        status: str,
        closed_reason: str | None = None,
    ):
        super().__init__(message)
        self.instance_id = instance_id
        self.run_id = run_id
        self.status = status
        self.closed_reason = closed_reason


class WorkflowFailedError(WorkflowClosedError):
    """The run failed. ``exception_type``, ``message`` and ``traceback`` are
    the body's failure as recorded; ``exception_class`` its stored class path and
    ``original`` that class, when it is one this process knows (never imported from
    the stored path), else None; ``failure_id`` the failure row."""

    def __init__(
        self,
        message: str,
        *,
        exception_type: str = "",
        exception_class: str = "",
        failure_message: str = "",
        traceback: str = "",
        original: type[BaseException] | None = None,
        failure_id: str | None = None,
        **run: Any,
    ):
        super().__init__(message, **run)
        self.exception_type = exception_type
        self.exception_class = exception_class
        #: The body's exception message (``str(error)`` is the whole sentence).
        self.message = failure_message
        self.traceback = traceback
        self.original = original
        self.failure_id = failure_id


class WorkflowTimedOutError(WorkflowFailedError):
    """The run failed because its execution or run deadline passed."""


class WorkflowCancelledError(WorkflowClosedError):
    """The run was cancelled (``reason`` as given to ``cancel()``)."""


class WorkflowTerminatedError(WorkflowClosedError):
    """The run was terminated."""


class WorkflowResultTimeoutError(DurableWorkflowError, TimeoutError):
    """``result(timeout=...)`` gave up waiting; the run is still open."""


class WorkflowAlreadyStartedError(CommandRejected):
    """start() found the instance already started under reject_duplicate."""


class WorkflowDeduplicatedError(WorkflowAlreadyStartedError):
    """start() named a ``deduplication_id`` that an open run of another instance holds
    (reason ``deduplication_id_in_use``); ``holder_instance_id`` names that instance."""

    def __init__(self, *args: Any, holder_instance_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holder_instance_id = holder_instance_id


class ActivityCompletionRejected(CommandRejected):
    """A completion, failure or heartbeat through a task token was refused (an invalid
    token, an attempt that timed out or was retried, an activity already closed, ...)."""


# Each class keeps the dotted path it was recorded under before it moved here.
for _error in list(globals().values()):
    if isinstance(_error, type) and _error.__module__ == __name__:
        _error.__module__ = "durable_workflow.exceptions"
