"""Counting the attempts of a workflow task that end without an outcome (poison tasks).

A workflow task's claim commits with its outcome, so an attempt that raises or
dies leaves no trace by itself; these writes, each in a transaction of its own,
keep the count on the task's ``attempt_count`` (see ``executor.poison``).
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import F

from durable_workflow.models import Task, TaskStatus


def count_attempt(task_id: uuid.UUID, *, now: dt.datetime) -> None:
    """One more attempt of a ready task begins (counted before it runs)."""
    Task.objects.filter(id=task_id, status=TaskStatus.READY).update(
        attempt_count=F("attempt_count") + 1, updated_at=now
    )


def uncount_attempt(task_id: uuid.UUID, *, now: dt.datetime) -> None:
    """Take back an attempt counted in advance (it was interrupted, it did not fail)."""
    Task.objects.filter(id=task_id, attempt_count__gt=0).update(
        attempt_count=F("attempt_count") - 1, updated_at=now
    )


def note_failed_attempt(task_id: uuid.UUID, error: str, *, count: int, now: dt.datetime) -> None:
    """An attempt failed: ``count`` attempts so far, and why the last one failed."""
    Task.objects.filter(id=task_id).update(
        attempt_count=count, last_error=error[:10000], updated_at=now
    )


def last_error(task_id: uuid.UUID) -> str:
    return str(Task.objects.filter(id=task_id).values_list("last_error", flat=True).first() or "")
