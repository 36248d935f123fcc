"""Follow-up work a task leaves for its own process, to run right after its commit.

A sequential workflow then needs no broker hop between its steps:

* a workflow task that schedules a queued activity it could run itself (same
  queue and connection as the run, the activity known here, no worker session)
  inserts its task leased to this process and runs it after the commit;
* the transaction recording that activity's result also runs the workflow task
  it wakes (``continue_here``), which leases the next activity;
  when it cannot, the new workflow task itself is the follow-up;
* a workflow task paused for a local activity goes on after its commit;
* the transaction recording one result of a fan-out leases the next ready
  sibling to this process (its own message then finds it taken); after quick
  members, several siblings at once, run one after the other and settled in
  one transaction (``EAGER_SIBLING_BATCH``).

``drain()`` runs the follow-ups one after the other, never nested, and counts
them: past ``EAGER_CHAIN_LIMIT`` in one message nothing more is handed off, so
the next task is published as usual and one long workflow cannot keep a
worker to itself. Crash safety does not depend on any of this: an eager
activity is leased like any claimed attempt (its lease expires if the process
dies), and an unpublished workflow task is published by the repair pass. A
follow-up that fails hands its lease back at once (``handback``) rather than
leave it to expire.

This module runs follow-ups without importing the modules that know how: each entry
module registers the handlers of its kinds (``handle``) when it is imported, and the
app's ``ready()`` imports both, so eager execution depends on nothing above it.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

from durable_workflow import queue_limits, registry
from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch, handback, hooks
from durable_workflow.logs import get_logger
from durable_workflow.store import database
from durable_workflow.store.records import ActivityRecord, RunRecord, TaskRecord

logger = get_logger("durable_workflow")

WORKFLOW = "workflow"
ACTIVITY = "activity"
ACTIVITIES = "activities"  # fan-out members taken together, settled together
PENDING = "pending"  # a workflow task paused for a local activity
#: Not a follow-up: the workflow task run inside the transaction that settled its activity.
CONTINUE = "continue"

_handlers: dict[str, Callable[..., Any]] = {}


def handle(kind: str, handler: Callable[..., Any]) -> None:
    """Make ``handler`` run the follow-ups of ``kind`` (called by the entry modules)."""
    _handlers[kind] = handler


def _handler(kind: str) -> Callable[..., Any]:
    try:
        return _handlers[kind]
    except KeyError:
        raise LookupError(
            f"no handler for eager follow-ups of kind {kind!r}: the durable_workflow app "
            "is not ready (its ready() imports the executor's entry modules)"
        ) from None


def continue_here(run: RunRecord, *, now: dt.datetime) -> bool:
    """Run the workflow task ``run`` needs inside the current transaction, if it may."""
    return bool(_handler(CONTINUE)(run, now=now))


class _State(threading.local):
    def __init__(self) -> None:
        self.follow_up: tuple[str, Any] | None = None
        self.hops = 0
        self.draining = False
        #: (task, execution, sole: the only activity its workflow task scheduled)
        self.held: tuple[TaskRecord, ActivityRecord, bool] | None = None
        #: An interrupt raised by code run inside another task's transaction, raised
        #: again once that transaction committed.
        self.interrupt: BaseException | None = None
        #: A database thread of async attempts (``event_loop``): it leases no activity.
        self.no_activities = False


_state = _State()


def allowed() -> bool:
    """May this process hand off one more follow-up in the current message?"""
    return room() > 0


def room() -> int:
    """How many more follow-ups this process may hand off in the current message."""
    return get_settings().EAGER_CHAIN_LIMIT - _state.hops


def offer(kind: str, value: Any) -> None:
    """Run ``value`` (a workflow task id, an activity lease, or a paused workflow task)
    once this transaction commits."""
    database.on_commit(lambda: setattr(_state, "follow_up", (kind, value)))


def interrupt_after_commit(exc: BaseException) -> None:
    """Raise ``exc`` (an interrupt) again from ``drain()``, after this transaction."""
    _state.interrupt = exc


def _raise_interrupt() -> None:
    """The interrupt kept by ``interrupt_after_commit``, if any: the worker stops now,
    and the follow-up left for it goes to the broker instead (for another worker)."""
    exc, _state.interrupt = _state.interrupt, None
    if exc is None:
        return
    follow_up, _state.follow_up = _state.follow_up, None
    if follow_up is not None and follow_up[0] == WORKFLOW:
        handback.publish(follow_up[1])
    raise exc


def drain() -> None:
    """Run the follow-ups the last task left, and theirs, until there are none."""
    _raise_interrupt()
    if _state.draining:
        return
    _state.draining = True
    _state.hops = 0
    try:
        while _state.follow_up is not None:
            (kind, value), _state.follow_up = _state.follow_up, None
            _state.hops += len(value) if kind == ACTIVITIES else 1
            try:
                _handler(kind)(value)
            except Exception:  # a held lease was handed back already (``handback``)
                logger.exception("eager %s task failed", kind)
                if kind == WORKFLOW:  # ready, and never published: publish it now
                    handback.publish(value)
            _raise_interrupt()
    finally:
        _state.draining = False
        _state.hops = 0
        _state.follow_up = None


# ---------------------------------------------------------------- activities


def wanted(run: RunRecord, execution: Any) -> bool:
    """Should this process run the activity just scheduled (if none is kept yet)?"""
    return _state.held is None and _activity_ok(run, execution)


def keep(task: TaskRecord, execution: ActivityRecord, *, sole: bool) -> None:
    """Remember the activity task this workflow task leased for this process (``sole``:
    the only activity the workflow task scheduled)."""
    _state.held = (task, execution, sole)


def take_held() -> tuple[TaskRecord, ActivityRecord, bool] | None:
    """The activity task kept in this workflow task (and forget it)."""
    held, _state.held = _state.held, None
    return held


def sibling_ok(done: ActivityRecord, sibling: ActivityRecord) -> bool:
    """May this process, having just run ``done``, run its fan-out sibling next?"""
    return (
        sibling.queue == done.queue
        and sibling.connection == done.connection
        and _runnable_here(sibling)
    )


def _activity_ok(run: RunRecord, execution: Any) -> bool:
    return (
        execution.queue == run.queue
        and execution.connection == run.connection
        and _runnable_here(execution)
    )


def no_activities_here() -> None:
    """This thread never leases an activity to itself (it serves async attempts)."""
    _state.no_activities = True


def activities_on() -> bool:
    """May this process lease one more activity to itself in the current message?"""
    return bool(
        get_settings().EAGER_ACTIVITIES
        and not _state.no_activities
        # The testing kit runs every ready task in the calling process already, and
        # its assertions count what was dispatched: nothing to save there.
        and not getattr(dispatch.backend(), "in_process", False)
        and allowed()
    )


def _runnable_here(execution: Any) -> bool:
    return bool(
        activities_on()
        and not execution.options.get("worker_session")
        # A limited queue's attempts are leased only through the claim, which counts.
        and not queue_limits.limit_of(execution.queue)
        and (
            execution.activity_type in hooks.activity_mocks
            or registry.has_activity(execution.activity_type)
        )
    )
