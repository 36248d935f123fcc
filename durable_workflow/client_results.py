"""The typed error ``WorkflowStub.result()`` raises for a run that closed without a result."""

from __future__ import annotations

from typing import Any

from durable_workflow.engine import exception_types
from durable_workflow.exceptions import (
    WorkflowCancelledError,
    WorkflowClosedError,
    WorkflowFailedError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)
from durable_workflow.models import RunStatus
from durable_workflow.store import commands
from durable_workflow.store.records import RunRecord


def closed_error(run: RunRecord, instance_id: str) -> WorkflowClosedError:
    """The error for ``run``, closed in any way but completed (or continued, when pinned)."""
    fields: dict[str, Any] = {
        "instance_id": instance_id,
        "run_id": str(run.id),
        "status": run.status,
        "closed_reason": run.closed_reason,
    }
    if run.status == RunStatus.CANCELLED:
        return WorkflowCancelledError(
            f"workflow {instance_id!r} was cancelled" + _because(run.closed_reason), **fields
        )
    if run.status == RunStatus.TERMINATED:
        return WorkflowTerminatedError(
            f"workflow {instance_id!r} was terminated" + _because(run.closed_reason), **fields
        )
    if run.status != RunStatus.FAILED:  # a pinned run that continued as new
        return WorkflowClosedError(
            f"run {run.id} of {instance_id!r} closed {run.status}/{run.closed_reason}; "
            "load the instance to follow its newest run",
            **fields,
        )
    failure = commands.failure_of(run_id=run.id, source_kind="workflow_run", source_id=str(run.id))
    cls = WorkflowTimedOutError if run.closed_reason == "timed_out" else WorkflowFailedError
    if failure is None:
        return cls(f"workflow {instance_id!r} failed", **fields)
    return cls(
        f"workflow {instance_id!r} failed: {failure.exception_type}: {failure.message}",
        exception_type=failure.exception_type,
        exception_class=failure.exception_class,
        failure_message=failure.message,
        traceback=failure.traceback,
        original=exception_types.resolve(failure.exception_type, failure.exception_class),
        failure_id=str(failure.id),
        **fields,
    )


def _because(reason: str | None) -> str:
    return f" ({reason})" if reason and reason not in ("cancelled", "terminated") else ""
