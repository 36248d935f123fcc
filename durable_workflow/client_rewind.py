"""``WorkflowStub.reset()`` and ``fork()``: rewind a run (``executor.reset`` does it)."""

from __future__ import annotations

from typing import Any

from durable_workflow.client_async import twin
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.results import ResetResult


class StubRewind:
    """Mixed into ``WorkflowStub``; acts on the run the stub holds (pinned or current)."""

    _instance_id: str
    _run: Any
    _pinned: bool

    def reset(
        self,
        to: str | int = "last_workflow_task",
        *,
        reason: str = "",
        dry_run: bool = False,
        request_id: str | None = None,
    ) -> ResetResult:
        """Start a new run of this instance from a point of this run's history.

        ``to``: ``"start"``, ``"first_failure"``, ``"last_workflow_task"`` or an event
        sequence (the new run keeps the history before the last workflow task boundary
        at or before that event). The kept prefix is replayed and the rest runs with
        the current code; signals received after the point are re-applied. An open
        run is terminated (reason ``reset``). Raises ``ResetRefusedError`` (with
        ``reason``) for a point that cannot be resumed; ``dry_run`` only checks and
        describes the point. The stub follows the new run. ``request_id``: sent again
        with the same id, nothing is reset again; the first result comes back.
        """
        from durable_workflow.executor.reset import reset_run

        result = reset_run(
            self._run_id(), to=to, reason=reason, dry_run=dry_run, request_id=request_id
        )
        self._follow(result)
        return result

    def fork(
        self,
        to: str | int = "last_workflow_task",
        *,
        new_instance_id: str,
        reason: str = "",
        dry_run: bool = False,
        request_id: str | None = None,
    ) -> ResetResult:
        """``reset`` into the new instance ``new_instance_id``; this run is left as it
        is. Use ``WorkflowStub.load(new_instance_id)`` for the fork. A repeated
        ``request_id`` forks nothing and returns the first result."""
        from durable_workflow.executor.reset import reset_run

        return reset_run(
            self._run_id(),
            to=to,
            reason=reason,
            new_instance_id=new_instance_id,
            dry_run=dry_run,
            request_id=request_id,
        )

    areset = twin(reset)
    afork = twin(fork)

    def _run_id(self) -> str:
        if self._run is None:
            raise WorkflowNotFoundError(f"workflow {self._instance_id!r} has no run to reset")
        return str(self._run.id)

    def _follow(self, result: ResetResult) -> None:
        if result.run_id is None:
            return
        from durable_workflow.store import runs

        self._run = runs.get_run(result.run_id)
        self._pinned = False
