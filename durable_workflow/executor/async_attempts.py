"""Async activity attempts: an ``async def handle()`` runs on its worker process's loop.

The Celery task that claims such an attempt does not wait for it: it leases the
attempt (transaction 1, as for any activity), hands the coroutine to the process's
event loop (``event_loop``) and returns, so that one worker slot starts as many
attempts as the loop takes (``ASYNC_ACTIVITY_CONCURRENCY``; a full loop makes the
slot wait for room). While the coroutine runs, the lease keeper renews its lease
as for a synchronous attempt. Its outcome is settled from the loop, in a database
thread, by the very functions a synchronous attempt's outcome goes through, with
the same fencing token: a report from an attempt that lost its lease is stale.

The coroutine is cancelled (``asyncio.CancelledError``) when

* its run is cancelled or closes: ``aheartbeat()`` finds it, and a per-process
  check asks for the runs of all running attempts every
  ``ASYNC_ACTIVITY_CHECK_SECONDS``: the attempt ends cancelled;
* its start-to-close or heartbeat timeout passes: the timeout is recorded at once
  (retry or final failure, as the watchdog would);
* its lease is lost (another attempt owns the work): nothing is reported;
* the worker stops: the attempt is handed back, uncounted, for another worker.

Outside a Celery worker (the testing kit, ``task_always_eager``, a local activity)
an async ``handle()`` runs to its end in the calling thread instead
(``invocation.run_to_end``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from durable_workflow import clock, logs, observe, registry
from durable_workflow.authoring.activity import is_async, running
from durable_workflow.conf import get_settings
from durable_workflow.converter import payloads
from durable_workflow.engine.failures import INTERRUPTS
from durable_workflow.exceptions import ActivityCancelled, CompleteAsync
from durable_workflow.executor import (
    async_completion,
    eager,
    handback,
    hooks,
    queue_gate,
    settlement,
    timeouts,
)
from durable_workflow.executor.attempts import Lease
from durable_workflow.executor.event_loop import loop
from durable_workflow.executor.heartbeat import heartbeat
from durable_workflow.executor.invocation import attempt_of, prepare_call
from durable_workflow.executor.lease_keeper import keeper
from durable_workflow.executor.outcomes import ActivityTaskOutcome as ActivityOutcome
from durable_workflow.logs import get_logger
from durable_workflow.models import TERMINAL_RUN_STATUSES
from durable_workflow.store import runs
from durable_workflow.store.records import ActivityRecord

logger = get_logger("durable_workflow")

CANCELLED, LOST, HANDBACK = "cancelled", "lost", "handback"
TIMEOUTS = ("start_to_close", "heartbeat")
#: How long a stopping worker waits for its attempts to be handed back one by one.
SHUTDOWN_SECONDS = 10.0


@dataclasses.dataclass(eq=False)
class Flight:
    """One async attempt on the loop."""

    lease: Lease
    task: asyncio.Task[Any] | None = None
    #: Why the engine cancelled the coroutine (``CANCELLED``, ``LOST``, ``HANDBACK``
    #: or a timeout kind); ``None``: it did not.
    reason: str | None = None
    deadline: float | None = None  # start-to-close, monotonic
    heartbeat_timeout: float | None = None
    beat_at: float = dataclasses.field(default_factory=time.monotonic)
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def cancel(self, reason: str) -> bool:
        """Cancel the coroutine (on the loop), once: whether this call did.

        The check, a heartbeat, a timeout and a stopping worker may each find a reason;
        a second ``CancelledError`` would cut short the clean-up the first one began.
        """
        if self.reason is not None:
            return False
        self.reason = reason
        if self.task is not None and not self.task.done():
            self.task.cancel(f"durable_workflow: {reason}")
        self.wake.set()
        return True


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flights: dict[uuid.UUID, Flight] = {}
        self.worker = False  # set in a Celery worker process
        self.closing = False
        self.slots: threading.Semaphore | None = None
        self.checker: asyncio.Task[None] | None = None


_state = _State()


def in_worker() -> None:
    """This process is a Celery worker: async attempts go to its event loop."""
    _state.worker = True
    _state.closing = False


def off_slot(execution: ActivityRecord) -> bool:
    """Does this attempt run on the event loop rather than in the caller's slot?"""
    if not _state.worker or get_settings().ASYNC_ACTIVITY_CONCURRENCY <= 0:
        return False
    kind = execution.activity_type
    if kind in hooks.activity_mocks:
        return inspect.iscoroutinefunction(hooks.activity_mocks[kind])
    return registry.has_activity(kind) and is_async(registry.activity_class(kind))


def in_flight() -> int:
    """Async attempts this process runs now."""
    with _state.lock:
        return len(_state.flights)


# ---------------------------------------------------------------- starting
def submit(lease: Lease) -> ActivityOutcome:
    """Start a claimed async attempt on the loop and return at once (``started``); wait
    for room first when the loop runs ``ASYNC_ACTIVITY_CONCURRENCY`` attempts."""
    holds = [handback.held(lease)]
    keeper.hold(holds, lease_seconds=get_settings().ACTIVITY_LEASE_SECONDS)
    try:
        slots = _slots()
        while not slots.acquire(timeout=0.5):
            if _state.closing:
                break
        else:
            if not _state.closing:
                flight = Flight(lease)
                with _state.lock:
                    _state.flights[lease.attempt_id] = flight
                asyncio.run_coroutine_threadsafe(_supervise(flight), loop.get())
                return ActivityOutcome.STARTED
            slots.release()
    except BaseException:
        keeper.release(holds)
        raise
    keeper.release(holds)
    handback.give_back(holds, lost=False)  # the worker stops: another one runs it
    return ActivityOutcome.HANDED_BACK


def _slots() -> threading.Semaphore:
    with _state.lock:
        if _state.slots is None:
            _state.slots = threading.Semaphore(get_settings().ASYNC_ACTIVITY_CONCURRENCY)
        return _state.slots


async def _supervise(flight: Flight) -> None:
    lease = flight.lease
    _ensure_checker()
    try:
        began = time.monotonic()
        outcome = await _run(flight)
        await loop.db(_finish, lease, flight.reason, outcome, time.monotonic() - began)
    except Exception:
        logger.exception("async activity attempt %s could not be settled", lease.attempt_id)
        await loop.db(handback.give_back, [handback.held(lease)])
    finally:
        keeper.release([handback.held(lease)])
        with _state.lock:
            _state.flights.pop(lease.attempt_id, None)
        _slots().release()
    if queue_gate.limited(lease.execution.queue):
        try:
            await loop.db(queue_gate.wake, lease.execution.queue)  # its slot is free now
        except Exception:  # the repair pass sends the waiters a lost wake-up left
            logger.warning("could not wake queue %r", lease.execution.queue, exc_info=True)


async def _run(flight: Flight) -> tuple[bool, Any]:
    """Run the attempt's coroutine to its end (or its cancellation): (ok, value)."""
    lease = flight.lease
    options = lease.execution.options
    if options.get("start_to_close_timeout"):
        flight.deadline = time.monotonic() + int(options["start_to_close_timeout"])
    if options.get("heartbeat_timeout"):
        flight.heartbeat_timeout = float(int(options["heartbeat_timeout"]))
    try:
        call, context = await loop.db(
            lambda: prepare_call(
                lease.execution,
                attempt=attempt_of(lease),
                payload_codec=lease.payload_codec,
                heartbeat=_no_sync_heartbeat,
                aheartbeat=functools.partial(_heartbeat, flight),
            )
        )
        with logs.attempt_scope(lease), running(context):
            flight.task = asyncio.ensure_future(_awaited(call))  # the task copies the context
    except BaseException as exc:  # undecodable arguments, say: a failure, as when sync
        return False, exc
    if flight.reason is not None:  # cancelled before it began
        flight.task.cancel()
    await _watch(flight)
    task = flight.task
    if task.cancelled():
        return False, asyncio.CancelledError()
    error = task.exception()
    return (True, task.result()) if error is None else (False, error)


async def _awaited(call: Callable[[], Any]) -> Any:
    result = call()
    if inspect.isawaitable(result):
        try:
            return await result
        except INTERRUPTS as exc:  # the loop must live on: the worker hands it back
            raise _Interrupted() from exc
    return result


class _Interrupted(Exception):
    """``KeyboardInterrupt`` or ``SystemExit`` in an async activity."""


async def _watch(flight: Flight) -> None:
    """Wait for the coroutine, cancelling it when a timeout passes."""
    assert flight.task is not None
    while not flight.task.done():
        now = time.monotonic()
        due = []
        if flight.deadline is not None:
            due.append((flight.deadline, "start_to_close"))
        if flight.heartbeat_timeout is not None:
            due.append((flight.beat_at + flight.heartbeat_timeout, "heartbeat"))
        expired = [kind for at, kind in due if at <= now]
        if expired and flight.reason is None:
            flight.cancel(expired[0])
        wait = min((at for at, _ in due), default=now + 3600) - now
        flight.wake.clear()
        waiter = asyncio.ensure_future(flight.wake.wait())
        await asyncio.wait(
            [flight.task, waiter], timeout=max(wait, 0.01), return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()


def _no_sync_heartbeat(details: Any = None) -> bool:
    raise TypeError("an async activity heartbeats with `await self.aheartbeat(...)`")


async def _heartbeat(flight: Flight, details: Any = None) -> bool:
    try:
        recorded = await loop.db(heartbeat, flight.lease, details)
    except ActivityCancelled:
        current = asyncio.current_task()
        if not flight.cancel(CANCELLED) and current is not None:
            current.cancel(f"durable_workflow: {CANCELLED}")  # it went on after the first
        await asyncio.sleep(0)  # CancelledError, here
        raise
    if recorded:
        flight.beat_at = time.monotonic()
        flight.wake.set()
    return recorded


# ---------------------------------------------------------------- settling
def _finish(lease: Lease, reason: str | None, outcome: tuple[bool, Any], seconds: float) -> None:
    """Settle an attempt's outcome (in a database thread)."""
    ok, value = outcome
    cancelled = not ok and isinstance(value, asyncio.CancelledError)
    with logs.attempt_scope(lease), handback.on_failure([handback.held(lease)]):
        if reason == LOST or (reason == HANDBACK and cancelled):
            if reason == HANDBACK:
                handback.give_back([handback.held(lease)], lost=False)
            return
        if not ok and isinstance(value, _Interrupted):
            handback.give_back([handback.held(lease)], lost=False)
            return
        if reason in TIMEOUTS and not ok:
            if not timeouts.enforce_activity_timeout(lease.execution.id, reason, now=clock.now()):
                logger.info("the %s timeout of %s was recorded already", reason, lease.attempt_id)
            return
        if not ok and isinstance(value, CompleteAsync):
            observe.activity_attempt(lease.execution, "async", seconds)
            async_completion.hand_over(lease)
            return
        if cancelled and reason == CANCELLED:
            value = ActivityCancelled("the workflow run was cancelled or has closed")
        if ok:
            ok, value = _encoded(lease, value)
        observe.activity_attempt(lease.execution, "completed" if ok else "failed", seconds)
        settlement.settle(lease, ok, value)
    eager.drain()  # the workflow task the result woke, when it may run here


def _encoded(lease: Lease, value: Any) -> tuple[bool, Any]:
    try:
        return True, payloads.encode_value(value, lease.payload_codec, "result")
    except Exception as exc:  # an unencodable result fails the attempt, as when sync
        return False, exc


# ---------------------------------------------------------------- cancellation
def _ensure_checker() -> None:
    checker = _state.checker
    if checker is None or checker.done() or checker.get_loop() is not asyncio.get_running_loop():
        _state.checker = asyncio.ensure_future(_check_forever())


async def _check_forever() -> None:
    while True:
        await asyncio.sleep(max(get_settings().ASYNC_ACTIVITY_CHECK_SECONDS, 0.05))
        try:
            await _check()
        except Exception:  # the database is away: the next round asks again
            logger.warning("could not check the runs of async activities", exc_info=True)


async def _check() -> None:
    """Cancel the attempts whose run was cancelled or closed, or whose lease was lost."""
    with _state.lock:
        flights = [f for f in _state.flights.values() if f.task is not None and f.reason is None]
    if not flights:
        return
    states = await loop.db(runs.cancel_states, list({f.lease.run_id for f in flights}))
    kept = set(keeper.held())
    for flight in flights:
        status, requested = states.get(flight.lease.run_id, (None, None))
        if status is None or status in TERMINAL_RUN_STATUSES:
            flight.cancel(CANCELLED)
        elif requested is not None and flight.lease.execution.scheduled_at < requested:
            flight.cancel(CANCELLED)  # clean-up scheduled after the cancel keeps running
        elif handback.held(flight.lease) not in kept:
            flight.cancel(LOST)


def cancel(run_id: uuid.UUID) -> int:
    """Cancel this process's async attempts of ``run_id`` now; how many."""
    running_loop = loop.running()
    with _state.lock:
        flights = [f for f in _state.flights.values() if f.lease.run_id == run_id]
    if running_loop is not None:
        for flight in flights:
            running_loop.call_soon_threadsafe(flight.cancel, CANCELLED)
    return len(flights)


# ---------------------------------------------------------------- shutdown
def shutdown(*, timeout: float = SHUTDOWN_SECONDS) -> int:
    """The worker stops: cancel every async attempt, hand each back (uncounted, for
    another worker), stop the loop; returns how many were handed back."""
    _state.closing = True
    # The process stops being a worker: an async attempt it runs later (the testing kit,
    # eager mode, an in-process worker started and stopped) runs inline again.
    _state.worker = False
    running_loop = loop.running()
    with _state.lock:
        flights = list(_state.flights.values())
    if running_loop is None:
        return 0
    for flight in flights:
        running_loop.call_soon_threadsafe(flight.cancel, HANDBACK)
    deadline = time.monotonic() + timeout
    while in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    with _state.lock:
        left = list(_state.flights.values())
    if left:  # their own hand-back did not finish in time: do it from here
        handback.give_back([handback.held(f.lease) for f in left], lost=False)
    loop.stop()
    _state.checker = None
    if flights:
        logger.info("handed back %s async activity attempts as the worker stops", len(flights))
    return len(flights)
