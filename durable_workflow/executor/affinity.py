"""Sticky routing: send a run's next workflow task to the process holding it warm.

When a registered worker finishes a workflow task and keeps the body in its
sticky cache, the run records ``sticky_worker_id`` (that worker) and
``sticky_until`` (now + ``STICKY_TTL_SECONDS``). Workflow tasks created for the
run while that holds inherit both, and their messages go to the owner's
direct queue. At claim time:

* no affinity: any worker claims, ``cold_replay``;
* affinity expired, or its owner is no longer live: any worker claims,
  ``forced_cold_replay``;
* the owner itself claims: ``sticky_hit_expected``;
* another worker got the message while the owner is live: it does not claim,
  and forwards the message to the owner.

Affinity is advice for speed, never for correctness: whoever claims the task
uses its warm body only if it is valid, and replays cold otherwise.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch, routing
from durable_workflow.executor.identity import direct_queue, registered_worker_id
from durable_workflow.store import tasks
from durable_workflow.store.records import RunRecord, TaskRecord

HIT = "sticky_hit_expected"
COLD = "cold_replay"
FORCED_COLD = "forced_cold_replay"


def _me() -> tuple[str, str] | None:
    """This process's worker id and direct queue, when it can be a sticky owner."""
    me = registered_worker_id()
    if me is None:
        return None
    queue = direct_queue()
    return (me, queue) if queue else None


def record(run: RunRecord, *, now: dt.datetime) -> None:
    """This worker keeps the run warm: make it the run's sticky owner.

    A process that cannot be reached directly (not a registered worker) clears
    the affinity instead: any warm body elsewhere is out of date now.
    """
    settings = get_settings()
    me = _me()
    if not settings.STICKY_ENABLED or settings.STICKY_CACHE_CAPACITY <= 0 or me is None:
        if run.sticky_worker_id:
            run.set(sticky_worker_id=None, sticky_until=None)
        return
    run.set(
        sticky_worker_id=me[0],
        sticky_until=now + dt.timedelta(seconds=settings.STICKY_TTL_SECONDS),
    )


def inherited(run: RunRecord, *, now: dt.datetime) -> dict[str, Any]:
    """The affinity a workflow task created now for ``run`` carries."""
    if (
        run.sticky_worker_id
        and run.sticky_until
        and run.sticky_until > now
        and get_settings().STICKY_ENABLED
    ):
        return {"sticky_worker_id": run.sticky_worker_id, "sticky_until": run.sticky_until}
    return {}


def routed_queue(task: TaskRecord, *, now: dt.datetime) -> str | None:
    """Where a workflow task's message goes: its live owner's direct queue, if any.

    When the owner is the only live worker consuming the task's queue, the
    shared queue reaches it anyway and keeps its order with the run's other
    tasks, so the message stays there.
    """
    if task.sticky_worker_id and task.sticky_until and task.sticky_until > now:
        direct = routing.owner_queue(task.sticky_worker_id, now=now)
        if direct is not None and routing.consumers(task, now=now) > 1:
            return direct
    return None


def decide(task: TaskRecord, *, now: dt.datetime) -> tuple[str, str | None]:
    """The claim's replay mode, and the owner's queue when this worker must hold off."""
    if not task.sticky_worker_id or not get_settings().STICKY_ENABLED:
        return COLD, None
    if not task.sticky_until or task.sticky_until <= now:
        return FORCED_COLD, None
    if task.sticky_worker_id == registered_worker_id():
        return HIT, None
    queue = routing.owner_queue(task.sticky_worker_id, now=now)
    me = _me()
    if queue is None or me is None or me[1] == queue:
        # The owner is gone; or this process is no routable worker (the testing
        # kit, a worker without registration); or it is a sibling process of the
        # owner's Celery node, whose queue cannot single out one process. Replay
        # here rather than bounce the message.
        return FORCED_COLD, None
    return FORCED_COLD, queue


def hand_over(task: TaskRecord, queue: str, *, now: dt.datetime) -> None:
    """Leave ``task`` ready and send its message to the owner's direct queue."""
    tasks.mark_dispatched([task.id], now=now)
    dispatch.enqueue(task, queue=queue)


def may_run_here(run: RunRecord, *, now: dt.datetime) -> bool:
    """Whether a workflow task of ``run`` may run in this process without a hop."""
    affinity = inherited(run, now=now)
    if not affinity or affinity["sticky_worker_id"] == registered_worker_id():
        return True
    return routing.owner_queue(affinity["sticky_worker_id"], now=now) is None


def _sticky_queue(task: TaskRecord, now: dt.datetime) -> str | None:
    return routed_queue(task, now=now) if task.sticky_worker_id else None


dispatch.add_router(_sticky_queue)
