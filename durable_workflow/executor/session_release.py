"""Sessions a workflow lets go of when it closes for good.

A session is scoped to a namespace and a session id, not to a run, and the
contract only ends one by its holder's close, its lease or its TTL. Left alone,
a finished workflow's session keeps a place among its holder's
``MAX_CONCURRENT_WORKER_SESSIONS`` until its lease lapses, and in-session tasks
of newer workflows are refused meanwhile. So the transaction that closes a run
(completed, failed, cancelled, terminated or timed out) also closes the sessions
its instance used, as if their holder had: status ``closed``, ``closed_at`` set.

Not released: sessions an open run of another instance has used too (it may
still need them), and anything at continue-as-new: the instance goes on, and its
next run usually carries on in the same session.

The other way round, a worker's planned shutdown closes the sessions it holds,
but closing is terminal: a workflow still between two in-session steps would
see its next step fail with ``session_closed``, so every deploy (and every
interrupt in an activity, which stops its worker) would fail such workflows.
A session an open run has used is handed back instead: its lease ends now
(``expired``, ``lease_expired``), as if its holder had been lost, and the next
step reacquires it on a capable worker (unless the session forbids that).
"""

from __future__ import annotations

import datetime as dt

from durable_workflow import clock
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.session_documents import namespace
from durable_workflow.logs import get_logger
from durable_workflow.store import database
from durable_workflow.store import sessions as store
from durable_workflow.store.records import RunRecord

logger = get_logger("durable_workflow")


def release_for_closed_run(run: RunRecord, *, now: dt.datetime) -> None:
    """Close the sessions ``run``'s instance holds; call in the transaction closing it."""
    if run.closed_reason == "continued":
        return
    released = store.close_released_by_instance(namespace(), run.instance_id, now=now)
    if released:
        logger.info(
            "run %s of %s closed (%s): released %d worker session(s)",
            run.id,
            run.instance_id,
            run.status,
            released,
        )


@retry_transaction
def hand_back(session_id: str, worker: str) -> bool:
    """End ``worker``'s lease on a session an open run has used, now; ``False``: no
    open run uses it (or the worker does not hold it), so nothing was done."""
    now = clock.now()
    with database.atomic():
        row = store.lock(namespace(), session_id)
        if row is None or row["status"] != "active" or row["lease_owner"] != worker:
            return False
        if not store.used_by_open_run(session_id):
            return False
        store.update(
            row["id"],
            status="expired",
            failure_reason="lease_expired",
            lease_expires_at=now,
            updated_at=now,
        )
    logger.info("worker %s handed back worker session %s on shutdown", worker, session_id)
    return True
