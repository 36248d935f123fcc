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
"""

from __future__ import annotations

import datetime as dt
import logging

from durable_workflow.executor.session_documents import namespace
from durable_workflow.store import sessions as store
from durable_workflow.store.records import RunRecord

logger = logging.getLogger("durable_workflow")


def release_for_closed_run(run: RunRecord, *, now: dt.datetime) -> list[str]:
    """Close the sessions ``run``'s instance holds; call in the transaction closing it."""
    if run.closed_reason == "continued":
        return []
    released = store.close_released_by_instance(namespace(), run.instance_id, now=now)
    if released:
        logger.info(
            "run %s of %s closed (%s): released worker sessions %s",
            run.id,
            run.instance_id,
            run.status,
            ", ".join(released),
        )
    return released
