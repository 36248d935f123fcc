"""Poison workflow tasks: one that fails or kills its worker again and again is parked.

A workflow task commits its claim with its outcome, so an attempt that raises
(an engine error, a value the database refuses) or dies with its process leaves
no trace: the task stays ready and is delivered again, forever. Two records
make those attempts countable on the task's ``attempt_count``:

* an attempt that raises is counted after its rollback (with its error in
  ``last_error``), in a transaction of its own;
* an attempt that may follow a lost one (its message was redelivered or re-sent,
  or the task counts attempts already) is counted *before* it runs, in a
  transaction of its own, so that its process dying still leaves the count.
  The first attempt of a task costs nothing extra, unless the task is flagged
  ``COUNT_FIRST`` (its step may have died once already, run in place with an
  activity's result).

Once ``WORKFLOW_TASK_MAX_ATTEMPTS`` attempts ended without an outcome the task
is parked (``parking.park``): a failure row, the ``workflow_task_failed``
signal, the doctor's ``durable_resume_paths`` check. Errors of the database
connection itself (``OperationalError``, ``InterfaceError``) are not counted: an
outage must not park healthy runs. An interrupt (``KeyboardInterrupt``,
``SystemExit``) is not counted either: its own advance count is taken back.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from typing import Any, Final

from django.db import InterfaceError, OperationalError

from durable_workflow import clock, logs
from durable_workflow.conf import get_settings
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.failures import describe
from durable_workflow.exceptions import WorkflowTaskAttemptsExceeded
from durable_workflow.executor import parking
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.identity import worker_id
from durable_workflow.logs import get_logger
from durable_workflow.models import FailureCategory, TaskStatus, WorkflowRun
from durable_workflow.store import runs, sql, task_attempts, tasks
from durable_workflow.store.records import TaskRecord
from durable_workflow.text import storable

logger = get_logger("durable_workflow")

#: Errors of the connection, not of the task: never counted.
TRANSIENT = (OperationalError, InterfaceError)


class Mark(enum.Enum):
    """``_start_once`` asks for the attempt to be counted before it claims the task."""

    MARK = "mark"


MARK: Final = Mark.MARK

#: The payload of a workflow task whose first attempt is counted before it runs: one
#: woken by an activity result that came after a lost attempt (that attempt's result may
#: have died with the same step run in place, in its transaction).
COUNT_FIRST = {"count_first": True}


@dataclasses.dataclass
class Attempt:
    """One attempt at a workflow task, as this process runs it."""

    task_id: uuid.UUID | str
    #: The message was redelivered by the broker (an earlier delivery may have died).
    redelivered: bool = False
    #: This attempt is counted already (in advance, or by its committed claim).
    counted: bool = False


def needs_mark(task: TaskRecord, attempt: Attempt) -> bool:
    """Must this attempt be counted before it runs: may an earlier one have died?"""
    if attempt.counted or not get_settings().WORKFLOW_TASK_MAX_ATTEMPTS:
        return False
    return (
        attempt.redelivered
        or task.attempt_count > 0
        or task.dispatch_count > 1
        or bool(task.payload.get("count_first"))
    )


@retry_transaction
def mark(attempt: Attempt) -> bool:
    """Count the attempt before it runs; ``True`` when the task is parked instead (it
    used up its attempts already)."""
    now = clock.now()
    with sql.atomic(WorkflowRun):
        task = tasks.get(attempt.task_id)
        run = runs.lock_run(task.run_id) if task is not None else None
        logs.bind(run)
        task = tasks.get(attempt.task_id)  # as it is under the run lock
        if run is None or task is None or task.status != TaskStatus.READY:
            return False  # someone else has it, or it is settled: the attempt finds out
        limit = get_settings().WORKFLOW_TASK_MAX_ATTEMPTS
        if task.attempt_count >= limit:
            last = task_attempts.last_error(task.id)
            info = _exhausted(task.attempt_count, last)
            parking.park(
                run, task.id, info, parking.REPEATED, now=now, details=_details(task, last)
            )
            return True
        task_attempts.count_attempt(task.id, now=now)
    attempt.counted = True
    return False


def failed(attempt: Attempt, exc: Exception) -> bool:
    """Count an attempt that raised (after its rollback); ``True`` when that used up the
    task's attempts and it is parked with this very error."""
    if isinstance(exc, TRANSIENT):
        interrupted(attempt)  # not the task's fault: an advance count is taken back
        return False
    try:
        return _failed(attempt, exc)
    except Exception:  # the database may be what failed: the error itself goes up
        logger.warning("could not count the failed attempt of %s", attempt.task_id, exc_info=True)
        return False


@retry_transaction
def _failed(attempt: Attempt, exc: Exception) -> bool:
    now = clock.now()
    info = describe(exc, category=FailureCategory.TASK_FAILURE)
    error = f"{info.exception_type}: {info.message}"
    with sql.atomic(WorkflowRun):
        task = tasks.get(attempt.task_id)
        run = runs.lock_run(task.run_id) if task is not None else None
        logs.bind(run)
        task = tasks.get(attempt.task_id)
        mine = task is not None and task.lease_owner == worker_id()  # paused, claim committed
        if run is None or task is None or not (task.status == TaskStatus.READY or mine):
            return False
        count = task.attempt_count + (0 if attempt.counted else 1)
        limit = get_settings().WORKFLOW_TASK_MAX_ATTEMPTS
        if limit and count >= limit:
            details = {"attempts": count, "last_error": error}
            parking.park(run, task.id, info, parking.REPEATED, now=now, details=details)
            return True
        task_attempts.note_failed_attempt(task.id, error, count=count, now=now)
    logger.warning("workflow task %s failed (attempt %s): %s", attempt.task_id, count, error)
    return False


def interrupted(attempt: Attempt) -> None:
    """An attempt that was interrupted (or met a database connection error) does not
    count: take back its count (best effort), if it was counted in advance or by a claim
    that committed (a task paused on a local activity, which ``finish_pending`` hands
    back)."""
    if not attempt.counted:
        return
    try:
        task_attempts.uncount_attempt(uuid.UUID(str(attempt.task_id)), now=clock.now())
    except Exception:
        logger.warning("could not uncount the interrupted attempt of %s", attempt.task_id)


def _exhausted(attempts: int, last_error: str) -> FailureInfo:
    error = WorkflowTaskAttemptsExceeded(attempts, last_error)
    return dataclasses.replace(
        describe(error, category=FailureCategory.TASK_FAILURE), traceback=storable(last_error)
    )


def _details(task: TaskRecord, last_error: str) -> dict[str, Any]:
    return {"attempts": task.attempt_count, "last_error": last_error[:2000]}
