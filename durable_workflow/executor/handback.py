"""Work this process holds but cannot finish goes back at once, not when its lease ends.

When an attempt's settle fails (its connection was killed, the database restarted),
the task used to stay leased until its lease ran out (300 s by default) although
nothing would ever finish it. Here it is handed back instead: on a fresh
connection, the task is made ready again under the run lock (only while this very
claim still holds it), its attempt counts as expired like one whose lease ran out,
and its message is sent so that any worker retries it. If even that fails (the
database is still away), lease expiry and the repair pass take over as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from durable_workflow import clock
from durable_workflow.engine.failures import INTERRUPTS
from durable_workflow.executor import dispatch
from durable_workflow.executor.repair import lease_lost, lease_returned
from durable_workflow.logs import get_logger
from durable_workflow.models import TaskStatus, WorkflowRun
from durable_workflow.store import connections, runs, sql, tasks

if TYPE_CHECKING:
    from durable_workflow.executor.attempts import Lease

logger = get_logger("durable_workflow")


@dataclasses.dataclass(frozen=True)
class Held:
    """One claim this process holds: the task and its fencing token."""

    task_id: uuid.UUID
    lease_id: uuid.UUID
    generation: int


def held(lease: Lease) -> Held:
    """The claim an activity attempt's lease stands for."""
    return Held(lease.task_id, lease.lease_id, lease.generation)


@contextlib.contextmanager
def on_failure(holds: Sequence[Held]) -> Iterator[None]:
    """Hand ``holds`` back if the block fails with an error (which still goes up), or is
    interrupted (``KeyboardInterrupt``, ``SystemExit``: the attempt is not counted as a
    lost lease, since its worker is stopping, not lost)."""
    try:
        yield
    except Exception:
        give_back(holds)
        raise
    except INTERRUPTS:
        give_back(holds, lost=False)
        raise


def give_back(holds: Sequence[Held], *, lost: bool = True) -> None:
    """Make each task still held ready again and send its message (best effort).

    ``lost``: an activity attempt counts as expired, like one whose lease ran out;
    otherwise it ends cancelled and counts for nothing.
    """
    connections.discard_broken()
    for held in holds:
        try:
            if _hand_back(held, lost):
                why = "after a failure" if lost else "as its worker stops"
                logger.info("handed task %s back %s", held.task_id, why)
        except Exception:
            logger.warning(
                "could not hand task %s back; its lease expiry will", held.task_id, exc_info=True
            )
            connections.discard_broken()


def _hand_back(held: Held, lost: bool) -> bool:
    now = clock.now()
    with sql.atomic(WorkflowRun):
        task = tasks.get(held.task_id)
        run = runs.lock_run(task.run_id) if task is not None else None
        if task is None or run is None:
            return False
        if not tasks.hand_back(held.task_id, held.lease_id, held.generation, now=now):
            return False
        (lease_lost if lost else lease_returned)(run, task, now=now)
        runs.save_run(run, now=now)
        fresh = tasks.get(held.task_id)
        if fresh is not None and fresh.status == TaskStatus.READY:
            dispatch.enqueue(fresh)
    return True


def publish(task_id: uuid.UUID) -> None:
    """Send the message of a ready task this process meant to run itself (best effort)."""
    connections.discard_broken()
    try:
        task = tasks.get(task_id)
        if task is not None and task.status == TaskStatus.READY:
            dispatch.backend().send(dispatch.routed(task), None)
            tasks.mark_dispatched([task.id], now=clock.now())
    except Exception:
        logger.warning("could not publish task %s; the repair pass will", task_id, exc_info=True)
        connections.discard_broken()
