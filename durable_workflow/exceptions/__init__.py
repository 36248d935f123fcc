"""Every error the library raises, under one root.

Cancellation-style exceptions derive from ``BaseException`` on purpose: a
workflow body that writes ``except Exception`` must not be able to swallow them.

The root is in ``exceptions.base`` and the errors a caller of the client sees in
``exceptions.client``; every one is named here, and its dotted path is
``durable_workflow.exceptions.<Name>`` wherever it is defined (failures are recorded
under it).
"""

from __future__ import annotations

from typing import Any

from durable_workflow.exceptions.base import DurableWorkflowError
from durable_workflow.exceptions.client import (
    ActivityCompletionRejected,
    CommandRejected,
    MessageFailedError,
    QueryFailedError,
    QueryHandlerFailedError,
    QueryRejectedError,
    SignalFailedError,
    SignalRejectedError,
    UpdateFailedError,
    UpdateHandlerFailedError,
    UpdateRejectedError,
    UpdateWaitTimedOutError,
    WorkflowAlreadyStartedError,
    WorkflowCancelledError,
    WorkflowClosedError,
    WorkflowDeduplicatedError,
    WorkflowFailedError,
    WorkflowParkedError,
    WorkflowResultTimeoutError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)

__all__ = [
    "NON_DETERMINISM_HINT",
    "ActivityCancelled",
    "ActivityCompletionRejected",
    "ActivityFailed",
    "ActivityLeaseExpired",
    "ActivityTimeoutError",
    "AsyncWorkflowCodeError",
    "BrokerUnavailable",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowTerminated",
    "CommandRejected",
    "CompleteAsync",
    "ConfigurationError",
    "DurableOperationCancelled",
    "DurableWorkflowError",
    "InvalidDurationError",
    "InvalidHeaderError",
    "InvalidInstanceIdError",
    "InvalidValueError",
    "MessageFailedError",
    "ModelInstanceNotFoundError",
    "NonDeterminismError",
    "NonDeterministicCallError",
    "NonRetryableError",
    "NotInActivityError",
    "NotInWorkflowError",
    "PayloadCodecError",
    "QueryCommandError",
    "QueryFailedError",
    "QueryHandlerFailedError",
    "QueryRejectedError",
    "ResetRefusedError",
    "SignalFailedError",
    "SignalRejectedError",
    "StructuralLimitExceeded",
    "UnknownTypeError",
    "UnresolvedFailureError",
    "UpdateFailedError",
    "UpdateHandlerFailedError",
    "UpdateRejectedError",
    "UpdateWaitTimedOutError",
    "VersionNotSupported",
    "WorkerSessionRejected",
    "WorkflowAlreadyStartedError",
    "WorkflowCancelled",
    "WorkflowCancelledError",
    "WorkflowClosedError",
    "WorkflowDeduplicatedError",
    "WorkflowFailedError",
    "WorkflowNotFoundError",
    "WorkflowOrmAccessError",
    "WorkflowParkedError",
    "WorkflowResultTimeoutError",
    "WorkflowTaskAttemptsExceeded",
    "WorkflowTerminated",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "WorkflowTimeout",
]


class ConfigurationError(DurableWorkflowError):
    """The DURABLE_WORKFLOW settings or a class definition are invalid."""


class AsyncWorkflowCodeError(ConfigurationError, TypeError):
    """Workflow code is ``async``: an ``async def`` body or handler, or a durable helper
    called from a coroutine or a running event loop. Bodies run on synchronous greenlets
    that replay deterministically (docs/how-to/async.md says why); use an async activity."""


class BrokerUnavailable(DurableWorkflowError):
    """A dispatch backend could not reach its broker; sending again later may work."""


class InvalidInstanceIdError(DurableWorkflowError, ValueError):
    """An instance id is not a URL-safe string of at most 191 characters."""


class InvalidValueError(DurableWorkflowError, ValueError):
    """A caller passed a name or value the engine will not store (empty or too long, a
    NUL byte, a lone surrogate, a control character, not JSON data); nothing was written.

    ``field`` names the argument, ``reason`` says what is wrong with it.
    """

    def __init__(self, message: str, *, field: str = "", reason: str = "") -> None:
        self.field = field
        self.reason = reason or message
        super().__init__(message)


class InvalidHeaderError(InvalidValueError):
    """A header map a caller or an interceptor passed is not a small map of safe strings
    (see ``durable_workflow.headers``)."""


class InvalidDurationError(DurableWorkflowError, ValueError):
    """A timer or timeout duration could not be understood."""


class UnknownTypeError(DurableWorkflowError, LookupError):
    """No workflow or activity class is registered under a type key."""


class WorkflowNotFoundError(DurableWorkflowError, LookupError):
    """No workflow instance or run exists for the given id."""


class NotInWorkflowError(DurableWorkflowError, RuntimeError):
    """A workflow-only helper was called outside a running workflow body."""


class NotInActivityError(DurableWorkflowError, RuntimeError):
    """An activity-only helper was called outside a running activity."""


class WorkflowOrmAccessError(DurableWorkflowError, RuntimeError):
    """A workflow body touched the database, which would break determinism."""


def _replacement(call: str) -> str:
    if call == "time.sleep":
        return "dw.timer(seconds) (a durable timer)"
    if call.startswith(("time.", "datetime.", "date.")):
        return "dw.now() (the time history recorded)"
    if call.startswith("uuid."):
        return "dw.uuid4() or dw.uuid7()"
    if call.startswith(("random.", "secrets.", "os.urandom")):
        return "dw.side_effect(fn) (its value is recorded once), or random.Random(seed)"
    if call.startswith(("os.environ", "os.getpid")):
        return "read it outside the workflow and pass it in as an argument, or dw.side_effect(fn)"
    return "an activity (dw.activity) or, for a quick read, dw.side_effect(fn)"


class NonDeterministicCallError(DurableWorkflowError, RuntimeError):
    """Workflow code called the clock, randomness, the environment or I/O directly.

    Replay would get another value (or repeat the I/O), so the run's history and
    its code would drift apart. ``call`` names the call, ``filename`` and
    ``lineno`` the workflow code that made it, ``replacement`` the durable way.
    """

    def __init__(self, call: str, *, filename: str = "<unknown>", lineno: int = 0) -> None:
        self.call = call
        self.filename = filename
        self.lineno = lineno
        self.replacement = _replacement(call)
        super().__init__(
            f"workflow code at {filename}:{lineno} called {call}, whose value or effect "
            f"would differ on replay. Instead: {self.replacement} "
            "(docs/explanation/replay.md#guarded-calls; Workflow.unsafe_calls = 'warn' "
            "or 'allow' lets it through)"
        )


#: What to do about a non-deterministic run, said with the error wherever it is shown.
NON_DETERMINISM_HINT = (
    "If the workflow's code changed while this run was open, guard the change with "
    "dw.patched() or dw.get_version() (docs/how-to/versioning.md) and deploy it, then "
    "repair the run (python manage.py workflow_repair --instance-id <id>)"
)


class NonDeterminismError(DurableWorkflowError):
    """Replayed code asked for something other than what history recorded."""

    def __init__(self, step: int, recorded: str | None, requested: str | None, detail: str = ""):
        self.step = step
        self.recorded = recorded
        self.requested = requested
        self.detail = detail
        #: The steps history recorded just before ``step`` (up to five), oldest first.
        self.recent_steps: tuple[str, ...] = ()
        #: ``file:line`` of the workflow code whose call diverged, when the code made one.
        self.call_site: str | None = None
        super().__init__(self._text())

    def explain(
        self, *, recent_steps: tuple[str, ...] | None = None, call_site: str | None = None
    ) -> None:
        """Add what the replay knew around the divergence (the engine calls this once)."""
        if recent_steps is not None and not self.recent_steps:
            self.recent_steps = recent_steps
        if call_site is not None and self.call_site is None:
            self.call_site = call_site
        self.args = (self._text(),)

    def _text(self) -> str:
        text = (
            f"non-deterministic workflow at step {self.step}: history recorded "
            f"{self.recorded or 'nothing'}, the code asked for {self.requested or 'nothing'}"
        )
        if self.call_site:
            text += f" at {self.call_site}"
        if self.detail:
            text += f" ({self.detail})"
        if self.recent_steps:
            text += ". Recorded before it: " + "; ".join(self.recent_steps)
        return text + ". " + NON_DETERMINISM_HINT


class UnresolvedFailureError(DurableWorkflowError):
    """History holds a failure whose exception no class of this process resolves to.

    Replay stops here rather than hand the body a plain ``ActivityFailed``: an
    ``except MovedError:`` that silently stops matching after a refactor would change
    what the workflow does. Map the recorded type key or class path to a class
    (``EXCEPTION_TYPES``, ``EXCEPTION_CLASS_ALIASES``, or a ``type_key`` on the class),
    deploy, and repair the run.
    """

    def __init__(self, exception_type: str, exception_class: str, failure_id: Any = None):
        self.exception_type = exception_type
        self.exception_class = exception_class
        self.failure_id = None if failure_id is None else str(failure_id)
        super().__init__(
            f"history records a failure of type {exception_type!r} (class {exception_class!r}) "
            "that no exception class of this process resolves to; map it in "
            "DURABLE_WORKFLOW['EXCEPTION_TYPES'] or ['EXCEPTION_CLASS_ALIASES'] (or import "
            "the class where the workflow is defined), deploy, then repair the run"
        )


class QueryCommandError(DurableWorkflowError):
    """A query method or a wait predicate tried to call a durable helper."""


class NonRetryableError(DurableWorkflowError):
    """Raise (or subclass) in an activity to stop further retries."""


class ModelInstanceNotFoundError(NonRetryableError, LookupError):
    """A model instance passed as an argument was deleted before the activity ran.

    Non-retryable: the row will not come back by itself. ``model`` is the
    ``app_label.model_name`` label, ``pk`` and ``using`` say which row.
    """

    def __init__(self, message: str, *, model: str = "", pk: Any = None, using: str = ""):
        super().__init__(message)
        self.model = model
        self.pk = pk
        self.using = using


class ActivityFailed(DurableWorkflowError):
    """An activity failed for good; raised inside the workflow body.

    When the original exception class can be imported, the engine raises a
    subclass of both that class and ``ActivityFailed`` so that ``except`` on
    either works.
    """

    def __init__(
        self,
        message: str = "",
        *,
        activity_type: str = "",
        exception_type: str = "",
        exception_class: str = "",
        non_retryable: bool = False,
        failure_id: str | None = None,
        details: Any = None,
    ):
        super().__init__(message)
        self.message = message
        self.activity_type = activity_type
        self.exception_type = exception_type
        self.exception_class = exception_class
        self.non_retryable = non_retryable
        self.failure_id = failure_id
        self.details = details


class ActivityTimeoutError(ActivityFailed):
    """An activity ran out of time (``timeout_kind``: schedule_to_start, start_to_close,
    schedule_to_close or heartbeat) and has no attempts left."""

    @property
    def timeout_kind(self) -> str | None:
        return getattr(self, "_timeout_kind", None)


class WorkerSessionRejected(NonRetryableError):
    """An in-session activity can never be admitted: its session is closed or used up."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(f"{message}: {reason}" if reason else message)

    @property
    def reason(self) -> str | None:
        """The admission reason (``session_closed`` or ``session_reacquire_disallowed``).

        Read from the message, so it survives the trip through history into a body.
        """
        message = str(self.args[0]) if self.args else ""
        return message.rpartition(": ")[2] or None


class ActivityLeaseExpired(DurableWorkflowError):
    """Recorded when an activity lost its lease more often than allowed."""


class WorkflowTaskAttemptsExceeded(DurableWorkflowError):
    """Recorded when a workflow task failed or killed its worker too often: it is parked
    instead of being delivered again (``WORKFLOW_TASK_MAX_ATTEMPTS``)."""

    def __init__(self, attempts: int, last_error: str = "") -> None:
        self.attempts = attempts
        self.last_error = last_error
        last = last_error.splitlines()[-1] if last_error.strip() else "none recorded"
        super().__init__(
            f"the workflow task ended without an outcome {attempts} times (it failed, or "
            f"its worker died); last error: {last}"
        )


class WorkflowTimeout(DurableWorkflowError):
    """Recorded on the failure row when a workflow execution or run deadline passes."""


class WorkflowTerminated(DurableWorkflowError):
    """Recorded on the failure row when a run is terminated."""


class ChildWorkflowFailed(ActivityFailed):
    """A child workflow failed; raised inside the parent body.

    Shares ``ActivityFailed``'s fields (exception type, class, message); when the
    child's exception class can be imported, the raised exception is also an
    instance of it.
    """


class ChildWorkflowCancelled(DurableWorkflowError):
    """A child workflow was cancelled; raised inside the parent body."""

    def __init__(self, message: str = "", **fields: Any):
        super().__init__(message)
        self.message = message
        for key, value in fields.items():
            setattr(self, key, value)


class ChildWorkflowTerminated(ChildWorkflowCancelled):
    """A child workflow was terminated; raised inside the parent body."""


class DurableOperationCancelled(DurableWorkflowError):
    """A select() member was cancelled and then awaited."""

    def __init__(self, message: str = "", **selection: Any):
        super().__init__(message)
        for key, value in selection.items():
            setattr(self, key, value)


class StructuralLimitExceeded(DurableWorkflowError):
    """A structural limit (pending work, batch, payload size...) was exceeded."""

    def __init__(self, kind: str, value: int, configured: int):
        self.kind = kind
        self.value = value
        self.configured = configured
        super().__init__(f"structural limit {kind} exceeded: {value} > {configured}")


class VersionNotSupported(DurableWorkflowError):
    """A recorded version marker lies outside the range the code supports."""


class PayloadCodecError(DurableWorkflowError, ValueError):
    """A value could not be encoded, or a stored payload could not be decoded.

    ``reason`` is one of the spec's machine-readable codes, e.g.
    ``invalid_payload_framing`` or ``unsupported_value_type``.
    """

    def __init__(
        self,
        reason: str,
        message: str = "",
        *,
        path: str | None = None,
        value_type: str | None = None,
    ):
        self.reason = reason
        #: Where the value sits (``argument 2 → items[3] → "when"``), when known.
        self.path = path
        #: The offending value's type, for values refused on the way in.
        self.value_type = value_type
        super().__init__(f"{reason}: {message}" if message else reason)


class WorkflowCancelled(BaseException):
    """The run was cancelled; derives from BaseException on purpose."""


class ActivityCancelled(BaseException):
    """The activity was cancelled; derives from BaseException on purpose."""


class CompleteAsync(BaseException):
    """Raise it from an activity's ``handle()`` to end the attempt without a result: the
    attempt stays open, and its task token completes, fails or heartbeats it later
    (``durable_workflow.activity_completion``). Derives from ``BaseException`` so that
    ``except Exception`` in the activity does not catch it."""


class ResetRefusedError(DurableWorkflowError):
    """A reset or fork refused, nothing written; ``reason``: ``engine.rewind.REFUSALS``."""

    def __init__(self, reason: str, message: str = "") -> None:
        self.reason = reason
        super().__init__(message or reason)
