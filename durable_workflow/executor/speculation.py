"""Steps whose first round trip is assumed rather than asked.

The transaction recording an activity's result begins by asking (run lock,
lease check, "is a workflow task waiting, is anything else open?") and only
then writes. In an eager sequential step the answers are almost always known
in advance: this process started the activity in its previous transaction, and
nobody has written to the run since. So when this process remembers the run as
that transaction left it, the settle assumes those answers and sends the
questions as *expectations* instead (``sql.expect_rows``, ``sql.expect_false``):
they travel first in the step's single query, lock and check the same rows, and
fail the transaction when the database disagrees. A refuted step is rolled back
whole and run again the regular way, and its run is not speculated on again in
this process for a minute (a run with other work open would be refuted every
time).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import threading
import time
import uuid
from typing import Any, NamedTuple

from durable_workflow.models import TaskStatus, WorkflowRun
from durable_workflow.store import activities, database, runs, sql, tasks
from durable_workflow.store import children as child_store
from durable_workflow.store.records import RunRecord

#: Runs refuted lately in this process are not speculated on for this long...
REFUTED_PAUSE_SECONDS = 60.0
#: ... and at most this many are remembered.
_REFUTED_KEPT = 1000

_last = threading.local()
_refuted: collections.OrderedDict[uuid.UUID, float] = collections.OrderedDict()
_lock = threading.Lock()


class Pending(NamedTuple):
    """What a settle asks once it holds the run lock (:func:`questions`, in this order)."""

    #: A workflow task of the run is waiting.
    ready: bool
    #: An activity other than those the settle records is open.
    others_open: bool
    #: A child call is open.
    calls: bool
    #: A timer is pending.
    timers: bool


NOTHING_PENDING = Pending(ready=False, others_open=False, calls=False, timers=False)


class SettleAnswers(NamedTuple):
    """What a settle's first round trip answers, read or assumed."""

    #: The run as its lock found it (``None``: gone).
    run: RunRecord | None
    #: For each lease settled, in order: was it still held (and is it now settled)?
    held: list[bool]
    pending: Pending
    #: The fan-out siblings read with the lock (``fan_out.statements``), or nothing.
    found: list[Any]


def remember_at_commit(run: RunRecord) -> None:
    """Keep ``run`` as its transaction leaves it (call when that transaction starts an
    activity this process runs next)."""
    if _refuted.get(run.id, 0.0) > time.monotonic():
        return
    database.on_commit(
        lambda: setattr(
            _last, "run", dataclasses.replace(run, dirty=set(), appended=[], open_work=None)
        )
    )


def take(lease: Any) -> RunRecord | None:
    """The run as this process last committed it, if the settle of ``lease`` may assume
    it (a single activity of a sequential step)."""
    run: RunRecord | None = getattr(_last, "run", None)
    _last.run = None
    if run is None or run.id != lease.run_id or lease.fan_out:
        return None
    return run


def refute(run_id: uuid.UUID) -> None:
    """The run was not as assumed: ask first for its next steps for a while."""
    with _lock:
        _refuted.pop(run_id, None)
        _refuted[run_id] = time.monotonic() + REFUTED_PAUSE_SECONDS
        while len(_refuted) > _REFUTED_KEPT:
            _refuted.popitem(last=False)


def questions(run_id: uuid.UUID, settled: list[uuid.UUID]) -> list[tuple[str, list[Any]]]:
    """What a settle asks once it holds the lock, as :class:`Pending` lists it: is a
    workflow task waiting; is an activity other than those it settles, a child call or
    a timer open."""
    return [
        tasks.ready_workflow_clause(run_id),
        activities.other_open_clause(run_id, settled),
        child_store.open_calls_clause(run_id),
        activities.pending_timers_clause(run_id),
    ]


def questions_statement(run_id: uuid.UUID, settled: list[uuid.UUID]) -> sql.Statement[Pending]:
    """:func:`questions` asked in one statement (its outcome: the :class:`Pending`)."""
    return sql.truths_statement(questions(run_id, settled)).then(lambda truths: Pending(*truths))


def assume(lease: Any, run: RunRecord, *, now: dt.datetime) -> SettleAnswers | None:
    """The answers the settle of ``lease`` would read (run, lease held, nothing pending),
    with the statements that check them deferred; ``None`` where statements cannot
    wait (then ask)."""
    if not sql.batching(WorkflowRun):
        return None
    expectations = [
        runs.expected_statement(run),
        sql.expect_rows(
            tasks.settle_if_held_statement(
                lease.task_id, lease.lease_id, lease.generation, TaskStatus.COMPLETED, now=now
            ),
            1,
        ),
        sql.expect_false(questions(run.id, [lease.execution.id])),
    ]
    sql.defer_all(WorkflowRun, expectations)
    assumed = dataclasses.replace(run, dirty=set(), appended=[], open_work=None)
    return SettleAnswers(run=assumed, held=[True], pending=NOTHING_PENDING, found=[])
