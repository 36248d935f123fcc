"""Automatic time skipping in fake mode: when nothing is ready, jump to the next due time.

``WorkflowStub.fake(skip_time=True)`` (or ``run_ready_tasks(skip_time=True)``)
drains what is ready; when nothing is, it moves the engine clock to the
earliest moment something becomes due (a timer, a retry's back-off, a delayed
workflow task, an activity or workflow deadline), enforces the deadlines due
then, and drains again, until nothing is left that time alone would start. A
run waiting for a signal, an update or an async completion stops the skipping
for that run (unless a deadline of its own is ahead).

The clock is *frozen* at each due time while that work runs, so timers fire
exactly when due (``dw.now()`` after ``dw.timer(90 * 86400)`` is the start plus
90 days, to the microsecond). A ticking clock goes on ticking from the last
due time afterwards; a frozen one stays there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db.models import Min, Q, QuerySet

from durable_workflow import clock
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityAttempt,
    ActivityExecution,
    ActivityStatus,
    AttemptStatus,
    Task,
    TaskStatus,
    WorkflowRun,
)

#: Skipping stops with an error after this many jumps (a workflow that loops on a timer
#: forever would otherwise never let the call return).
MAX_JUMPS = 100_000


class EndlessTimeError(RuntimeError):
    """Time skipping never ran out of due work: a workflow loops on timers forever."""


def next_due(now: dt.datetime) -> dt.datetime | None:
    """The earliest moment after ``now`` when a task or a deadline becomes due."""
    moments: list[dt.datetime | None] = [
        Task.objects.filter(status=TaskStatus.READY, available_at__gt=now).aggregate(
            at=Min("available_at")
        )["at"],
    ]
    open_executions = ActivityExecution.objects.filter(
        status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    )
    for field in ("schedule_to_close_deadline_at", "schedule_to_start_deadline_at"):
        moments.append(_earliest(open_executions, field, now))
    running = ActivityAttempt.objects.filter(status=AttemptStatus.RUNNING)
    for field in ("start_to_close_deadline_at", "heartbeat_deadline_at"):
        moments.append(_earliest(running, field, now))
    open_runs = WorkflowRun.objects.exclude(status__in=TERMINAL_RUN_STATUSES)
    for field in ("execution_deadline_at", "run_deadline_at"):
        moments.append(_earliest(open_runs, field, now))
    return min((moment for moment in moments if moment is not None), default=None)


def _earliest(rows: QuerySet[Any], field: str, now: dt.datetime) -> dt.datetime | None:
    found: dt.datetime | None = rows.filter(Q(**{f"{field}__gt": now})).aggregate(at=Min(field))[
        "at"
    ]
    return found


def run_skipping(drain: Callable[[], int]) -> int:
    """``drain()``, then jump to each next due moment and drain again; tasks run."""
    from durable_workflow.conf import get_settings
    from durable_workflow.executor.timeouts import enforce_due_timeouts

    _, frozen = clock.snapshot()
    ran = drain()
    jumped = False
    for _ in range(MAX_JUMPS):
        due = next_due(clock.now())
        if due is None:
            break
        clock.freeze(due)
        jumped = True
        enforce_due_timeouts(now=due, limit=get_settings().REPAIR_SCAN_LIMIT)
        ran += drain()
    else:
        raise EndlessTimeError(
            f"time skipping made {MAX_JUMPS} jumps and there is still work due later; "
            "is a workflow sleeping in an endless loop?"
        )
    if jumped and frozen is None:  # the clock ticked before: it ticks on from here
        clock.restore((clock.now() - dt.datetime.now(dt.UTC), None))
    return ran
