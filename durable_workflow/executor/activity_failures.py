"""How a failed activity attempt ends: retried after its back-off, or failed for good.

Shared by queued activities, local activities, timeouts, the repair pass and
worker sessions (a session that can never admit again fails its activity).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Protocol

from durable_workflow import logs, observe
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.events import EventType
from durable_workflow.engine.failures import matches
from durable_workflow.exceptions import NonRetryableError, PayloadCodecError
from durable_workflow.executor import dispatch, lifecycle
from durable_workflow.executor.common import wake_workflow
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.models import ActivityStatus, AttemptStatus, TaskType
from durable_workflow.store import activities, tasks
from durable_workflow.store.records import ActivityRecord, RunRecord

logger = logs.get_logger("durable_workflow")


class FailedAttempt(Protocol):
    """What a failed attempt's report says about it (a ``Lease``, or a task token's
    attempt)."""

    @property
    def execution(self) -> ActivityRecord: ...
    @property
    def attempt_id(self) -> uuid.UUID: ...
    @property
    def attempt_number(self) -> int: ...
    @property
    def task_id(self) -> uuid.UUID | None: ...


def non_retryable(exc: BaseException, declared: list[str]) -> bool:
    """Is this failure final, by its type or by the activity's declared type names?"""
    return isinstance(exc, NonRetryableError | PayloadCodecError) or matches(exc, declared)


def retry_or_fail(
    lease: FailedAttempt,
    run: RunRecord,
    exc: BaseException,
    info: FailureInfo,
    base: dict[str, Any],
    *,
    now: dt.datetime,
) -> tuple[ActivityOutcome, list[tuple[str, dict[str, Any]]]]:
    """A failed attempt: a retry after its back-off, or the activity's final failure."""
    execution = lease.execution
    policy = execution.options
    final = non_retryable(exc, policy.get("non_retryable_error_types") or [])
    max_attempts = int(policy.get("max_attempts", 1))
    activities.close_attempt(lease.attempt_id, AttemptStatus.FAILED, now=now)
    if not final and (max_attempts == 0 or lease.attempt_number < max_attempts):
        backoff = policy.get("backoff") or [1]
        delay = int(backoff[min(lease.attempt_number - 1, len(backoff) - 1)])
        activities.reopen_execution(execution.id)
        retry = tasks.create_task(
            run_id=run.id,
            namespace=run.namespace,
            task_type=TaskType.ACTIVITY,
            available_at=now + dt.timedelta(seconds=delay),
            queue=execution.queue,
            connection=execution.connection,
            activity_execution_id=execution.id,
            now=now,
            payload={
                "retry_of_task_id": str(lease.task_id),
                "retry_after_attempt_id": str(lease.attempt_id),
                "retry_after_attempt": lease.attempt_number,
                "retry_backoff_seconds": delay,
            },
            compatibility=run.compatibility,
            priority=execution.options.get("priority"),
        )
        dispatch.enqueue(retry)
        _log(run, lease, info, f"retry in {delay} s")
        event = {
            **base,
            "retry_task_id": str(retry.id),
            "retry_backoff_seconds": delay,
            "exception_type": info.exception_type,
            "message": info.message,
        }
        return ActivityOutcome.RETRYING, [(EventType.ACTIVITY_RETRY_SCHEDULED, event)]
    _log(run, lease, info, "non-retryable" if final else "no attempts left")
    return ActivityOutcome.FAILED, [
        record_final_failure(
            run,
            execution,
            attempt_id=lease.attempt_id,
            attempt_number=lease.attempt_number,
            info=info,
            non_retryable=final,
            now=now,
        )
    ]


def _log(run: RunRecord, lease: FailedAttempt, info: FailureInfo, then: str) -> None:
    execution = lease.execution
    with logs.scope(run, activity_id=execution.id, attempt=lease.attempt_number):
        logger.info(
            "workflow %s: activity %s (%s) attempt %s failed, %s: %s: %s",
            run.label(),
            execution.activity_type,
            execution.id,
            lease.attempt_number,
            then,
            info.exception_type,
            info.message,
        )


def record_final_failure(
    run: RunRecord,
    execution: ActivityRecord,
    *,
    attempt_id: uuid.UUID | None,
    attempt_number: int,
    info: FailureInfo,
    non_retryable: bool,
    now: dt.datetime,
    wake: bool = True,
) -> tuple[str, dict[str, Any]]:
    """The activity failed for good: failure row, closed execution, the workflow woken."""
    failure_id = lifecycle.record_failure_of(
        info,
        run,
        source_kind="activity_execution",
        source_id=str(execution.id),
        non_retryable=non_retryable,
        details={"propagation_kind": "timeout"} if info.category == "timeout" else {},
        now=now,
    )
    activities.close_execution(execution.id, ActivityStatus.FAILED, now=now)
    observe.activity_failed(execution, info.category)
    if wake:
        wake_workflow(run, now=now)
    return (
        EventType.ACTIVITY_FAILED,
        {
            "sequence": execution.sequence,
            "activity_execution_id": str(execution.id),
            "activity_attempt_id": str(attempt_id) if attempt_id else None,
            "activity_type": execution.activity_type,
            "activity_class": execution.activity_class,
            "attempt_number": attempt_number,
            "failure_id": str(failure_id),
            "failure_category": info.category,
            "exception_type": info.exception_type,
            "exception_class": info.exception_class,
            "message": info.message,
            "non_retryable": non_retryable,
        },
    )
