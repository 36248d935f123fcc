"""Completing an activity from elsewhere, by its task token (asynchronous completion).

Inside the activity::

    token = dw.activity_info().task_token
    send_to_the_outside_world(token)
    raise dw.CompleteAsync()

Later, from any process that can reach the database::

    dw.activity_completion(token).complete({"approved": True})

Each report is accepted only while the token's attempt is the activity's
current, running attempt; otherwise ``ActivityCompletionRejected`` says why
(see ``executor.async_completion``).
"""

from __future__ import annotations

from typing import Any

from durable_workflow.client_async import twin
from durable_workflow.engine.failures import describe
from durable_workflow.exceptions import ActivityCompletionRejected
from durable_workflow.executor import async_completion
from durable_workflow.executor.async_completion import Report
from durable_workflow.executor.heartbeat import check_progress
from durable_workflow.models import FailureCategory


class ActivityCompletionHandle:
    """Reports for the attempt a task token names."""

    def __init__(self, task_token: str) -> None:
        self._token = task_token

    def __repr__(self) -> str:
        return "<ActivityCompletionHandle>"  # the token is a credential: never shown

    def complete(self, result: Any = None) -> None:
        """The activity's result: the workflow goes on with it."""
        _raise_if_rejected(async_completion.complete(self._token, result))

    def fail(self, error: BaseException) -> None:
        """The attempt failed with ``error``: retried after its back-off if the activity
        has attempts left (and ``error`` is not non-retryable), else the activity fails."""
        if not isinstance(error, BaseException):
            raise TypeError(f"fail() takes an exception, not {error!r}")
        info = describe(error, category=FailureCategory.ACTIVITY)
        _raise_if_rejected(async_completion.fail(self._token, info, error))

    def heartbeat(self, details: dict[str, Any] | None = None) -> None:
        """Renew the attempt's heartbeat deadline (and record ``details``, the progress
        shape of ``Activity.heartbeat``). Rejected with ``cancel_requested`` once the
        workflow asked to cancel: stop, then call ``report_cancellation()``."""
        _raise_if_rejected(async_completion.heartbeat(self._token, check_progress(details)))

    def report_cancellation(self) -> None:
        """The work stopped because the workflow asked it to: the attempt ends cancelled."""
        _raise_if_rejected(async_completion.report_cancellation(self._token))

    # awaitable twins, for async code (``client_async``)
    acomplete = twin(complete)
    afail = twin(fail)
    aheartbeat = twin(heartbeat)
    areport_cancellation = twin(report_cancellation)


def activity_completion(task_token: str) -> ActivityCompletionHandle:
    """A handle that completes, fails or heartbeats the attempt ``task_token`` names."""
    return ActivityCompletionHandle(task_token)


def _raise_if_rejected(report: Report) -> None:
    if not report.accepted:
        raise ActivityCompletionRejected(
            report.outcome,
            report.rejection_reason,
            f"the activity report was refused: {report.rejection_reason}",
            activity_id=report.activity_id,
            cancel_requested=report.cancel_requested,
        )
