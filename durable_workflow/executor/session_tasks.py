"""Admission of in-session activity tasks, and what a refused task does next.

Called inside the activity claim's transaction, before the task is leased.
A refused task stays ready and its message moves on: to the session holder's
direct queue when another worker holds the session, back to this worker after
a pause when the session is at its activity limit, and back to the task's
queue after a pause otherwise (another worker may be capable). The pause
doubles with each message the task has had (``WORKER_SESSION_REFUSAL_BACKOFF_SECONDS``
up to ``WORKER_SESSION_REFUSAL_MAX_BACKOFF_SECONDS``), and the task is not due
before it ends, so a task that waits long for a session is offered a few times,
not once a second. A task whose session can never admit it again (closed, or
expired for good) fails its activity with ``WorkerSessionRejected`` so the
workflow hears about it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.engine.failures import describe
from durable_workflow.exceptions import WorkerSessionRejected
from durable_workflow.executor import dispatch, identity, lifecycle, session_admission, sessions
from durable_workflow.executor.activity_failures import record_final_failure
from durable_workflow.logs import get_logger
from durable_workflow.models import FailureCategory, TaskStatus
from durable_workflow.store import runs, tasks
from durable_workflow.store import sessions as session_store
from durable_workflow.store.records import ActivityRecord, RunRecord, TaskRecord

logger = get_logger("durable_workflow")

#: Doublings after which the pause stops growing (it is capped well before).
_MAX_DOUBLINGS = 30


def admitted(
    task: TaskRecord, run: RunRecord, execution: ActivityRecord, *, now: dt.datetime
) -> bool:
    """Admit this worker to the task's session; ``False`` means do not claim the task."""
    options = dict(execution.options["worker_session"])
    options["queue"] = options.get("queue") or execution.queue
    options["connection"] = options.get("connection") or execution.connection
    worker = sessions.worker_for(None, now=now)
    result = session_admission.admit(options, worker, now=now, activity_task_id=task.id)
    if result["admitted"]:
        return True
    reason = result["reason"]
    error = f"{session_store.REFUSAL_PREFIX}{reason}: {result.get('error', '')}"
    tasks.note_error(task.id, error, now=now)
    logger.info("in-session activity task %s not admitted: %s", task.id, reason)
    if reason in session_admission.PERMANENT_REASONS:
        _fail_for_good(task, run, execution, result, now=now)
    else:
        queue, wait = _next_stop(reason, options["session_id"], pause(task), now=now)
        tasks.defer(task.id, until=now + dt.timedelta(seconds=wait), now=now)
        dispatch.enqueue(task, queue=queue, delay=wait)
    return False


def pause(task: TaskRecord) -> float:
    """How long a refused task waits before its message is offered again: the first
    pause, doubled for each message the task had before this one, up to the cap."""
    settings = get_settings()
    doublings = min(max(task.dispatch_count - 1, 0), _MAX_DOUBLINGS)
    first = settings.WORKER_SESSION_REFUSAL_BACKOFF_SECONDS
    return float(min(first * 2**doublings, settings.WORKER_SESSION_REFUSAL_MAX_BACKOFF_SECONDS))


def _next_stop(
    reason: str, session_id: str, wait: float, *, now: dt.datetime
) -> tuple[str | None, float]:
    mine = identity.direct_queue()
    if reason == "session_owned_by_another_worker":
        holder = sessions.holder_queue(session_id, now=now)
        if holder is None:  # the holder has no direct queue: back to the shared one
            return None, wait
        # Straight to the holder's node; a sibling process of the holder shares its
        # node's queue, so it waits instead of spinning.
        return holder, (wait if holder == mine else 0.0)
    if reason == "session_activity_limit_exceeded":
        return mine, wait
    return None, wait


def _fail_for_good(
    task: TaskRecord,
    run: RunRecord,
    execution: ActivityRecord,
    result: dict[str, Any],
    *,
    now: dt.datetime,
) -> None:
    error = WorkerSessionRejected(
        f"worker session {execution.options['worker_session']['session_id']!r} refused the "
        "activity",
        reason=result["reason"],
    )
    info = describe(error, category=FailureCategory.ACTIVITY)
    tasks.settle(task.id, TaskStatus.FAILED, now=now, error=info.message)
    event = record_final_failure(
        run,
        execution,
        attempt_id=None,
        attempt_number=execution.attempt_count,
        info=info,
        non_retryable=True,
        now=now,
    )
    event[1]["worker_session_reason"] = result["reason"]
    lifecycle.append(run, [event], now=now)
    runs.save_run(run, now=now)
