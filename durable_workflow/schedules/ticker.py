"""The tick: fire every due schedule once, drain buffers, safely from many machines.

Two guards, belt and braces. A cache lock (a Redis lock with django-redis, an
``add``-based lock with any other cache) lets one ticker at a time do the work,
so the others return at once; it lives a few seconds and is renewed while its
tick runs, so a ticker that dies inside a tick holds the others off only that
long. Correctness does not depend on it: each schedule
is evaluated in its own transaction under its row lock, and every fire slot is
a row with a unique (schedule, slot) key, so two ticks that overlap anyway
(lock expired, process-local cache) can never start the same slot twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from django.core.cache import caches

from durable_workflow import clock, logs
from durable_workflow.conf import get_settings
from durable_workflow.executor.common import retry_transaction
from durable_workflow.logs import get_logger
from durable_workflow.models.schedules import ScheduleFireKind
from durable_workflow.schedules import firing, store
from durable_workflow.schedules.firing import FireResult
from durable_workflow.schedules.policies import Outcome, ScheduleStatus
from durable_workflow.store import database

logger = get_logger("durable_workflow.schedules")

LOCK_KEY = "durable_workflow:schedule_tick"


@dataclasses.dataclass(frozen=True)
class TickReport:
    lock_acquired: bool
    results: list[dict[str, Any]]


def lock_settings() -> tuple[str, float]:
    settings = get_settings()
    alias = getattr(settings, "SCHEDULE_LOCK_CACHE", None) or "default"
    timeout = float(getattr(settings, "SCHEDULE_LOCK_TIMEOUT_SECONDS", None) or DEFAULT_TIMEOUT)
    return alias, timeout


#: The lock's lifetime when the setting is 0: short, since a dead holder keeps every other
#: ticker out that long; a live one renews it every third of that.
DEFAULT_TIMEOUT = 5.0

#: Name of the thread that renews a held lock while its tick runs.
RENEWER_THREAD = "durable-workflow-tick-lock"

#: How the lock this process holds is renewed (``None``: it holds none).
_renew: Callable[[], bool] | None = None


def renew_held_lock() -> bool:
    """Give the held ticker lock its full lifetime again; ``False`` when this process
    holds none, or lost it (it expired and another ticker took it)."""
    renew = _renew
    if renew is None:
        return False
    try:
        return renew()
    except Exception:  # the cache is unreachable: the tick goes on, the rows still guard it
        logger.warning("could not renew the schedule ticker lock", exc_info=True)
        return False


@contextlib.contextmanager
def tick_lock() -> Iterator[bool]:
    """Yield True when this process holds the ticker lock (never waits for it).

    The lock lives ``SCHEDULE_LOCK_TIMEOUT_SECONDS`` (5 s by default) and a thread renews
    it every third of that while the tick runs: a ticker killed inside a tick keeps the
    others out for at most that long."""
    alias, timeout = lock_settings()
    cache = caches[alias]
    if hasattr(cache, "lock"):  # django-redis: a real Redis lock with an owner token
        # Not thread-local: the renewing thread must see the owner token.
        lock = cache.lock(LOCK_KEY, timeout=timeout, thread_local=False)
        acquired = bool(lock.acquire(blocking=False))
        release: Callable[[], None] = lock.release
        renew: Callable[[], bool] = lambda: bool(lock.reacquire())  # noqa: E731
    else:
        token = uuid.uuid4().hex
        acquired = bool(cache.add(LOCK_KEY, token, timeout))

        def release() -> None:
            if cache.get(LOCK_KEY) == token:
                cache.delete(LOCK_KEY)

        def renew() -> bool:
            return cache.get(LOCK_KEY) == token and bool(cache.touch(LOCK_KEY, timeout))

    if not acquired:
        yield False
        return
    try:
        with _renewing(renew, every=timeout / 3):
            yield True
    finally:
        with contextlib.suppress(Exception):  # it may have expired meanwhile
            release()


@contextlib.contextmanager
def _renewing(renew: Callable[[], bool], *, every: float) -> Iterator[None]:
    global _renew
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            if not renew_held_lock():
                return

    _renew = renew
    thread = threading.Thread(target=loop, name=RENEWER_THREAD, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        _renew = None
        thread.join(timeout=every)


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
                with logs.scope():  # the schedule's workflow type, once read
                    results += [row.as_dict() for row in _tick_schedule(ulid)]
            except Exception as exc:
                with logs.scope(workflow_type=_workflow_type(ulid)):
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
def _workflow_type(ulid: uuid.UUID) -> str | None:
    try:
        record = store.get(ulid)
    except Exception:  # the database may be what failed
        return None
    return record.workflow_type if record else None


def _tick_schedule(ulid: uuid.UUID) -> list[FireResult]:
    with database.atomic():
        schedule = store.lock(ulid, skip_locked=True)
        if schedule is None or schedule.status != ScheduleStatus.ACTIVE:
            return []  # another ticker has it, or it changed since we listed it
        logs.bind(workflow_type=schedule.workflow_type)
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
