"""``dw.worker_session(...)``: pin several activities to one worker process.

The handle is plain data: creating it records nothing. Each ``.activity(...)``
is an ordinary queued activity whose options snapshot carries the session's
``worker_session`` document; the worker that admits the first one takes the
session's lease, and the following ones run only where that lease is held.
"""

from __future__ import annotations

from typing import Any

from durable_workflow.authoring.helpers import _runtime, _split_options, schedule_activity
from durable_workflow.options import ActivityOptions, WorkerSessionOptions


class WorkerSessionHandle:
    """Schedules in-session activities; obtained from ``dw.worker_session()``."""

    def __init__(self, session_id: str, options: WorkerSessionOptions) -> None:
        self.options = options
        self._snapshot = options.snapshot(session_id)
        self.session_id: str = self._snapshot["session_id"]

    def __repr__(self) -> str:
        return f"<WorkerSessionHandle {self.session_id!r}>"

    def snapshot(self) -> dict[str, Any]:
        """The ``worker_session`` document stored with each in-session activity."""
        return dict(self._snapshot)

    def activity(
        self, activity: type | str, *args: Any, options: ActivityOptions | None = None
    ) -> Any:
        """Run ``activity`` on the session's holder and return its result."""
        options, args = _split_options(args, options, ActivityOptions)
        return schedule_activity(
            activity, args, options, helper="worker_session", worker_session=self._snapshot
        )

    execute_activity = activity


def worker_session(
    session_id: str, options: WorkerSessionOptions | None = None
) -> WorkerSessionHandle:
    """A handle whose activities all run on the worker holding ``session_id``."""
    _runtime("worker_session")
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a string, not {session_id!r}")
    return WorkerSessionHandle(session_id, options or WorkerSessionOptions())
