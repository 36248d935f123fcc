"""What the client hands back: the typed error ``WorkflowStub.result()`` raises for a run
that closed without a result, and the result objects of commands, updates and starts."""

from __future__ import annotations

from typing import Any

from durable_workflow.converter import CLIENT, payloads
from durable_workflow.engine import exception_types
from durable_workflow.exceptions import (
    CommandRejected,
    WorkflowAlreadyStartedError,
    WorkflowCancelledError,
    WorkflowClosedError,
    WorkflowDeduplicatedError,
    WorkflowFailedError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)
from durable_workflow.executor.deduplication import REASON as DEDUPLICATED
from durable_workflow.models import RunStatus
from durable_workflow.results import CommandResult, StartResult, UpdateResult
from durable_workflow.store import commands
from durable_workflow.store.messages import UpdateRecord
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


def command_result(outcome: Any, pinned: bool) -> CommandResult:
    return CommandResult(
        accepted=outcome.accepted,
        outcome=outcome.outcome,
        command_id=str(outcome.command_id),
        instance_id=outcome.instance_id,
        run_id=str(outcome.run_id) if outcome.run_id else None,
        rejection_reason=outcome.rejection_reason,
        metadata=dict(outcome.metadata),
        target_scope="run" if pinned else "instance",
        reason=getattr(outcome, "reason", None),
    )


def update_result(record: UpdateRecord | None, outcome: Any, hint: Any = None) -> UpdateResult:
    if record is None:
        return UpdateResult(
            accepted=False,
            update_status="rejected",
            update_id=None,
            update_name="",
            command_id=str(outcome.command_id),
            rejection_reason=outcome.rejection_reason,
            outcome=outcome.outcome,
            metadata=dict(outcome.metadata),
        )
    status = record.status
    value = None
    if status == "completed" and record.result is not None:
        value = payloads.decode_value(record.result, hint, root="update result", receiver=CLIENT)
    closed_outcome = {"completed": "update_completed", "failed": "update_failed"}
    return UpdateResult(
        accepted=status != "rejected",
        update_status=status,
        update_id=str(record.id),
        update_name=record.update_name,
        command_id=str(record.command_id),
        result=value,
        failure_message=record.failure_message or None,
        rejection_reason=record.rejection_reason,
        outcome=outcome.outcome
        if outcome is not None and outcome.outcome
        else closed_outcome.get(status),
        closed_at=record.closed_at,
        metadata=dict(outcome.metadata) if outcome is not None else {},
    )


def start_result(start: Any) -> StartResult:
    """A start command's outcome, as the client reports it."""
    return StartResult(
        accepted=start.accepted,
        outcome=start.outcome,
        command_id=str(start.command_id),
        instance_id=start.instance_id,
        run_id=str(start.run_id) if start.run_id else None,
        rejection_reason=start.rejection_reason,
        holder_instance_id=getattr(start, "holder_instance_id", None),
    )


def start_rejected_error(result: StartResult, instance_id: str) -> WorkflowAlreadyStartedError:
    """What ``start()`` raises for a refused start: the instance id is taken, or (a
    ``WorkflowDeduplicatedError``) another open run holds the de-duplication id."""
    if result.rejection_reason == DEDUPLICATED:
        return WorkflowDeduplicatedError(
            result.outcome,
            result.rejection_reason,
            f"workflow {instance_id!r} was not started: an open run of "
            f"{result.holder_instance_id!r} holds its deduplication_id",
            command_id=result.command_id,
            holder_instance_id=result.holder_instance_id,
        )
    return WorkflowAlreadyStartedError(
        result.outcome,
        result.rejection_reason,
        f"workflow {instance_id!r} was already started",
        command_id=result.command_id,
    )


def raise_if_rejected(result: CommandResult, what: str) -> CommandResult:
    """``result``, or ``CommandRejected`` when the command was refused."""
    if result.rejected:
        raise CommandRejected(
            result.outcome,
            result.rejection_reason,
            f"{what} was rejected: {result.rejection_reason or result.outcome}",
            **result.metadata,
        )
    return result
