"""The limits of named work queues, enforced when an activity attempt is leased.

A claim of a task on a limited queue locks the queue's row (last, after the run lock)
and measures the queue's room: its live leases against ``concurrency``, its starts in
the last rate period against ``rate``, the leases of the claiming worker node against
``worker_concurrency``. Tasks sent for a slot and not claimed yet hold that slot, and
a fresh task waits behind older or more urgent waiters, so a slot goes to the waiter
the engine chose. A refused task is marked waiting and its message is dropped.

Nothing polls. Waiters are sent (:func:`refill`) when an attempt ends, when a claim is
refused or admitted beside waiters, and by the repair pass (:func:`wake_all`) in case a
wake-up was lost; each send is one waiter per free slot, most urgent then oldest. When
only the rate holds them back, one waiter is sent ahead with a broker countdown for
the moment the window opens; its claim then sends the next one.

Eager starts and fan-out batches bypass the broker and the claim; a limited queue's
activities never take those paths (``eager``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

from durable_workflow import clock, queue_limits
from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.identity import node_name
from durable_workflow.logs import get_logger
from durable_workflow.models import TaskType
from durable_workflow.queue_limits import QueueLimit
from durable_workflow.store import database, tasks, work_queues, workers
from durable_workflow.store.records import TaskRecord
from durable_workflow.store.work_queues import CAPACITY, RATE, WORKER

logger = get_logger("durable_workflow")

_UNLIMITED = 1 << 30


@dataclasses.dataclass(frozen=True)
class Room:
    """Attempts that may start now; when none may, which limit holds (``reason``) and,
    when it is the rate alone, when its window next opens."""

    free: int
    reason: str | None = None
    opens_at: dt.datetime | None = None


def limited(queue: str | None) -> bool:
    return queue_limits.limit_of(queue) is not None


def first_wait(queue: str | None) -> str:
    """How a new task of a limited queue waits until the first wake sends it."""
    limit = queue_limits.limit_of(queue)
    if limit is not None and limit.concurrency is None:
        return RATE if limit.rate is not None else WORKER
    return CAPACITY


def admit(task: TaskRecord, *, now: dt.datetime) -> bool:
    """In the claim's transaction, after the run lock: may ``task`` be leased now?

    ``False``: it is marked waiting (why: ``capacity``, ``rate`` or ``worker``).
    """
    limit = queue_limits.limit_of(task.queue)
    if limit is None or task.task_type != TaskType.ACTIVITY:
        return True
    work_queues.lock(limit.name, now=now)
    facts = work_queues.claim_facts(task.id)
    node = node_name()
    room = room_of(limit, now=now, node=node, claiming=task.id)
    free = room.free
    if facts.queue_wait != work_queues.WOKEN and free > 0:
        free -= work_queues.waiting_ahead(limit.name, facts)  # they were here first
    if free > 0:
        if limit.rate is not None:
            work_queues.record_start(
                limit.name,
                now=now,
                forget_before=now - dt.timedelta(seconds=limit.rate.period),
            )
        if limit.worker_concurrency is not None:
            work_queues.set_lease_node(task.id, node)
        return True
    # Refused for waiters ahead: it waits for what holds the queue back the most.
    reason = room.reason or CAPACITY
    work_queues.mark_waiting(task.id, reason=reason, now=now)
    logger.debug("task %s waits (%s) on queue %r", task.id, reason, task.queue)
    if room.free > 0 or room.opens_at is not None or room.reason == WORKER:
        # The waiters ahead fit the free slots; or the rate's next window; or another
        # node has room. A full queue sends nothing: an attempt's end will.
        refill(limit, now=now)
    return False


def admitted(queue: str | None, *, now: dt.datetime) -> None:
    """After a claim on a rate-limited queue, in its transaction: arm the next window."""
    limit = queue_limits.limit_of(queue)
    if limit is not None and limit.rate is not None:
        refill(limit, now=now)


def room_of(
    limit: QueueLimit,
    *,
    now: dt.datetime,
    node: str | None = None,
    claiming: uuid.UUID | None = None,
) -> Room:
    """The queue's room now, under its lock. With ``node``: for a claim by that worker
    node (``claiming``: the task, whose own reservation does not count against it);
    without: the fleet's (the per-worker limit estimated over the live nodes)."""
    rooms = []
    # Sent and due: those slots are taken. One sent ahead for the next rate window holds
    # none before it is due (until then the rate refuses everyone anyway).
    reserved = work_queues.woken(limit.name, due_by=now, exclude=claiming)
    leased = None
    if limit.concurrency is not None:
        leased = work_queues.leased(limit.name, now=now)
        rooms.append(Room(limit.concurrency - leased - reserved, CAPACITY))
    if limit.rate is not None:
        rooms.append(_rate_room(limit, now=now, due=reserved))
    if limit.worker_concurrency is not None:
        if node is not None:
            mine = work_queues.leased(limit.name, now=now, node=node)
            rooms.append(Room(limit.worker_concurrency - mine, WORKER))
        else:
            if leased is None:
                leased = work_queues.leased(limit.name, now=now)
            nodes = _live_nodes(limit.name, now=now)
            rooms.append(Room(nodes * limit.worker_concurrency - leased - reserved, WORKER))
    room = min(rooms, key=lambda r: r.free, default=Room(_UNLIMITED))
    if room.free <= 0 and room.reason == RATE and all(r.free > 0 for r in rooms if r is not room):
        return room  # the rate alone holds: it knows when it opens
    return dataclasses.replace(room, opens_at=None)


def _rate_room(limit: QueueLimit, *, now: dt.datetime, due: int) -> Room:
    rate = limit.rate
    assert rate is not None
    period = dt.timedelta(seconds=rate.period)
    starts = work_queues.starts_since(limit.name, now - period)
    free = rate.limit - len(starts) - due
    opens_at = None
    if free <= 0:
        # The window has room again once enough of its oldest starts have left it.
        leaving = len(starts) + due - rate.limit  # index of the start that must leave
        if 0 <= leaving < len(starts):
            opens_at = starts[leaving] + period
    return Room(free, RATE, opens_at)


def _live_nodes(queue: str, *, now: dt.datetime) -> int:
    """Worker nodes consuming ``queue`` (one per Celery node: its processes share a
    direct queue); at least the nodes holding its leases, at least one."""
    stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
    nodes = {
        row["direct_queue"] or row["worker_id"]
        for row in workers.live(now=now, stale_after=stale_after)
        if queue in (row["queues"] or [])
    }
    return max(len(nodes), work_queues.leasing_nodes(queue, now=now), 1)


def refill(limit: QueueLimit, *, now: dt.datetime) -> int:
    """Under the queue's lock: send waiters for the free slots, most urgent then oldest,
    and, when only the rate holds the rest back, one ahead for its next window."""
    waiting = work_queues.waiting_count(limit.name)
    if not waiting:
        return 0
    room = room_of(limit, now=now)
    woken = work_queues.take_waiting(limit.name, count=min(room.free, waiting), now=now)
    for row in woken:
        dispatch.enqueue(tasks.record_of(row))
    if (
        len(woken) < waiting
        and room.opens_at is not None
        and not work_queues.sent_ahead(limit.name, now=now)
    ):
        for row in work_queues.take_waiting(limit.name, count=1, now=now, due=room.opens_at):
            dispatch.enqueue(tasks.record_of(row))  # a broker countdown to the window
    return len(woken)


@retry_transaction
def wake(queue: str | None) -> int:
    """Send as many of the queue's waiting tasks as it has room for; how many."""
    limit = queue_limits.limit_of(queue)
    if limit is None:
        return 0
    now = clock.now()
    with database.atomic():
        # Lock, then look: a claim refused a moment ago has committed its wait by then.
        work_queues.lock(limit.name, now=now)
        return refill(limit, now=now)


def wake_all() -> int:
    """:func:`wake` every limited queue (the repair pass: a lost wake-up costs one pass),
    and send the waiters of queues whose limits were taken out of the settings."""
    declared = queue_limits.declared()
    return sum(wake(name) for name in declared) + _release_undeclared(sorted(declared))


@retry_transaction
def _release_undeclared(declared: list[str]) -> int:
    with database.atomic():
        released = work_queues.release_undeclared(declared, now=clock.now())
        for row in released:
            dispatch.enqueue(tasks.record_of(row))
    if released:
        logger.info("%s tasks waited on queues that have no limit any more", len(released))
    return len(released)
