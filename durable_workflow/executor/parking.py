"""Parking a run on a failed workflow task: the run stays as it was, the task says why.

A workflow task fails, rather than the run, when the code cannot go on with this
history: a replay that no longer matches, a body touching the ORM, an unknown
type, an undecodable payload, an exception the workflow does not declare as a
failure of the run (``BodyFailed``), or a task that failed or crashed its worker
too often. The run keeps its status and history; a failure row (category
``task_failure``), the task's ``last_error`` and the ``workflow_task_failed``
signal say why, and ``repair`` (after a deploy) gives it a new workflow task.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from durable_workflow import logs
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.failures import BodyFailed, describe
from durable_workflow.exceptions import (
    NonDeterminismError,
    NonDeterministicCallError,
    PayloadCodecError,
    UnknownTypeError,
    UnresolvedFailureError,
    WorkflowOrmAccessError,
)
from durable_workflow.executor import lifecycle
from durable_workflow.logs import get_logger
from durable_workflow.models import FailureCategory, TaskStatus
from durable_workflow.signals import WORKFLOW_TASK_FAILED
from durable_workflow.store import tasks
from durable_workflow.store.records import RunRecord

logger = get_logger("durable_workflow")

#: Why a task failed, by the error that failed it (in the failure row's details and on
#: the lifecycle signal).
REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (BodyFailed, "undeclared_exception"),
    (NonDeterminismError, "non_determinism"),
    (WorkflowOrmAccessError, "orm_access"),
    (NonDeterministicCallError, "nondeterministic_call"),
    (UnknownTypeError, "unknown_type"),
    (PayloadCodecError, "payload_codec"),
    (UnresolvedFailureError, "unresolved_failure"),
)
#: A task that failed or crashed its worker ``WORKFLOW_TASK_MAX_ATTEMPTS`` times.
REPEATED = "repeated_attempts"


def park_on_error(
    run: RunRecord, task_id: uuid.UUID, exc: BaseException, *, now: dt.datetime
) -> None:
    """Park the run on its task, failed by ``exc`` (a ``BodyFailed`` is its body's error)."""
    cause = exc.error if isinstance(exc, BodyFailed) else exc
    reason = next((name for kind, name in REASONS if isinstance(exc, kind)), "task_error")
    park(run, task_id, describe(cause, category=FailureCategory.TASK_FAILURE), reason, now=now)


def park(
    run: RunRecord,
    task_id: uuid.UUID,
    info: FailureInfo,
    reason: str,
    *,
    now: dt.datetime,
    details: dict[str, Any] | None = None,
) -> None:
    """Fail the task with ``info``: a failure row, the task's note, a signal on commit."""
    lifecycle.record_failure_of(
        info,
        run,
        source_kind="workflow_task",
        source_id=str(task_id),
        category=FailureCategory.TASK_FAILURE,
        non_retryable=False,
        details={"task_failure_reason": reason, **(details or {})},
        now=now,
    )
    error = f"{info.exception_type}: {info.message}"
    tasks.settle(task_id, TaskStatus.FAILED, now=now, error=error)
    lifecycle.announce(
        run,
        WORKFLOW_TASK_FAILED,
        {"exception_class": info.exception_class, "message": info.message, "reason": reason},
    )
    with logs.scope(run):
        logger.error(
            "workflow %s: workflow task %s failed (%s): %s", run.label(), task_id, reason, error
        )
