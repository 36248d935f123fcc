"""The tick: fire every due schedule once, drain buffers, safely from many machines.

Two guards, belt and braces. A cache lock (a Redis lock with django-redis, an
``add``-based lock with any other cache) lets one ticker at a time do the work,
so the others return at once. Correctness does not depend on it: each schedule
is evaluated in its own transaction under its row lock, and every fire slot is
a row with a unique (schedule, slot) key, so two ticks that overlap anyway
(lock expired, process-local cache) can never start the same slot twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Iterator
from typing import Any

from django.core.cache import caches
from django.db import transaction

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.executor.common import retry_transaction
from durable_workflow.models.schedules import ScheduleFireKind
from durable_workflow.schedules import firing, store
from durable_workflow.schedules.firing import FireResult
from durable_workflow.schedules.policies import Outcome, ScheduleStatus

logger = logging.getLogger("durable_workflow.schedules")

LOCK_KEY = "durable_workflow:schedule_tick"


@dataclasses.dataclass(frozen=True)
class TickReport:
    lock_acquired: bool
    results: list[dict[str, Any]]


def lock_settings() -> tuple[str, float]:
    settings = get_settings()
    alias = getattr(settings, "SCHEDULE_LOCK_CACHE", None) or "default"
    timeout = float(getattr(settings, "SCHEDULE_LOCK_TIMEOUT_SECONDS", None) or 300)
    return alias, timeout


@contextlib.contextmanager
def tick_lock() -> Iterator[bool]:
    """Yield True when this process holds the ticker lock (never waits for it)."""
    alias, timeout = lock_settings()
    cache = caches[alias]
    if hasattr(cache, "lock"):  # django-redis: a real Redis lock with an owner token
        lock = cache.lock(LOCK_KEY, timeout=timeout)
        acquired = lock.acquire(blocking=False)
        try:
            yield bool(acquired)
        finally:
            if acquired:
                with contextlib.suppress(Exception):  # it may have expired meanwhile
                    lock.release()
        return
    token = uuid.uuid4().hex
    acquired = cache.add(LOCK_KEY, token, timeout)
    try:
        yield acquired
    finally:
        if acquired and cache.get(LOCK_KEY) == token:
            cache.delete(LOCK_KEY)


def tick(*, limit: int | None = None) -> TickReport:
    """One pass over due and buffered schedules; returns one row per action taken."""
    with tick_lock() as acquired:
        if not acquired:
            logger.info("another schedule tick holds the lock; skipping this one")
            return TickReport(lock_acquired=False, results=[])
        now = clock.now()
        due = store.due_schedule_ids(now=now, limit=limit)
        buffered = store.buffered_schedule_ids(limit=limit)
        ordered = list(dict.fromkeys([*due, *buffered]))
        results: list[dict[str, Any]] = []
        for ulid in ordered:
            try:
                results += [row.as_dict() for row in _tick_schedule(ulid)]
            except Exception as exc:
                logger.exception("schedule %s failed to tick", ulid)
                record = store.get(ulid)
                results.append(
                    FireResult(
                        schedule_id=record.schedule_id if record else str(ulid),
                        namespace=record.namespace if record else "",
                        outcome=Outcome.FAILED,
                        reason=f"{type(exc).__name__}: {exc}",
                    ).as_dict()
                )
        return TickReport(lock_acquired=True, results=results)


@retry_transaction
def _tick_schedule(ulid: uuid.UUID) -> list[FireResult]:
    with transaction.atomic():
        schedule = store.lock(ulid, skip_locked=True)
        if schedule is None or schedule.status != ScheduleStatus.ACTIVE:
            return []  # another ticker has it, or it changed since we listed it
        now = clock.now()
        results = []
        drained = firing.drain(schedule, now=now)
        if drained is not None:
            results.append(drained)
        due_at = schedule.next_fire_at
        if schedule.status == ScheduleStatus.ACTIVE and due_at is not None and due_at <= now:
            # Fire once for the overdue time, then resume from the clock: occurrences
            # missed while no ticker ran are dropped (backfill replays them).
            result = firing.fire(
                schedule,
                occurrence=due_at,
                kind=ScheduleFireKind.TICK,
                policy=schedule.overlap_policy,
                now=now,
            )
            if schedule.status == ScheduleStatus.ACTIVE:
                schedule.set(next_fire_at=firing.next_fire_time(schedule, after=now))
            result.next_fire_at = schedule.next_fire_at
            results.append(result)
        store.save(schedule, now=now)
        return results
