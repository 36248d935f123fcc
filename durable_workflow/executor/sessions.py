"""Worker sessions: one worker at a time holds a session, and runs its activities.

Here are the verbs workers and operators call (``create``, ``heartbeat``, ``close``,
the listings), the asking worker's registration, and the routing of an in-session
activity's message to the session's holder; admission, and the row decisions the
verbs share, are in ``session_admission``. Every status change happens under the
session's row lock, in the caller's transaction.

A session's status is refreshed lazily, whenever a row is read for a decision:
past its TTL it is ``expired`` for good (``ttl_expired``); past its lease it is
``expired`` (``lease_expired``); with its holder's registration silent for
``WORKER_STALE_AFTER_SECONDS`` it is ``orphaned`` (``worker_heartbeat_stale``).
The last two may be reacquired by a capable worker unless the session forbids it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.identity import registered_worker_id, worker_id
from durable_workflow.executor.routing import owner_queue
from durable_workflow.executor.session_admission import (
    WILDCARD,
    SessionWorker,
    admit,
    ok,
    refresh,
    rejected,
    renew,
)
from durable_workflow.executor.session_documents import live, metrics, namespace, snapshot
from durable_workflow.executor.session_release import hand_back
from durable_workflow.store import database, workers
from durable_workflow.store import sessions as store
from durable_workflow.store.records import TaskRecord

# ------------------------------------------------------------------ workers


def worker_for(worker: str | None, *, now: dt.datetime) -> SessionWorker | None:
    """The live registration of ``worker`` (default: this process), else ``None``.

    The testing kit's in-process executor stands in as a worker serving every
    queue with every capability, registered on first use.
    """
    if worker is None:
        worker = registered_worker_id()
        if worker is None and getattr(dispatch.backend(), "in_process", False):
            return _in_process_worker(now)
        if worker is None:
            return None
    row = workers.get(worker)
    if row is None or not live(row, now):
        return None
    return SessionWorker(
        worker_id=row["worker_id"],
        queues=tuple(row["queues"] or ()),
        capabilities=tuple(row["capabilities"] or ()),
        max_concurrent_worker_sessions=row["max_concurrent_worker_sessions"],
    )


def _in_process_worker(now: dt.datetime) -> SessionWorker:
    import os
    import socket

    me = worker_id()
    workers.register(
        worker_id=me,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=[WILDCARD],
        capabilities=[WILDCARD],
        max_concurrent_worker_sessions=0,
        sticky_cache={},
        now=now,
    )
    return SessionWorker(me, (WILDCARD,), (WILDCARD,), None)


# ------------------------------------------------------------------ verbs


@retry_transaction
def create(options: dict[str, Any]) -> dict[str, Any]:
    """Explicit ``create`` for a worker: ``options`` plus the asking ``worker_id``."""
    now = clock.now()
    if not isinstance(options, dict) or not isinstance(options.get("worker_id"), str):
        return rejected("invalid_worker_session", "create needs a worker_id string")
    with database.atomic():
        worker = worker_for(options["worker_id"], now=now)
        return admit(options, worker, now=now)


@retry_transaction
def heartbeat(session_id: str, worker: str, *, lease_seconds: int | None = None) -> dict[str, Any]:
    """Explicit ``heartbeat``: the holder keeps its lease."""
    if lease_seconds is not None and (
        isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int) or lease_seconds < 1
    ):
        return rejected("invalid_worker_session", "lease_seconds must be an integer >= 1")
    now = clock.now()
    with database.atomic():
        row = store.lock(namespace(), session_id)
        if row is None:
            return rejected("session_not_found", f"no session {session_id!r}")
        row = refresh(row, now)
        if row["status"] != "active":
            return rejected("session_not_active", f"session is {row['status']}", row=row)
        if row["lease_owner"] != worker:
            return rejected(
                "session_owner_mismatch", f"session is held by {row['lease_owner']}", row=row
            )
        return ok("heartbeat_recorded", renew(row, worker, now, lease_seconds))


@retry_transaction
def close(session_id: str, worker: str) -> dict[str, Any]:
    """Explicit ``close`` by the holder; closing twice is answered ``already_closed``."""
    now = clock.now()
    with database.atomic():
        row = store.lock(namespace(), session_id)
        if row is None:
            return rejected("session_not_found", f"no session {session_id!r}")
        if row["lease_owner"] != worker:
            return rejected(
                "session_owner_mismatch", f"session is held by {row['lease_owner']}", row=row
            )
        if row["status"] == "closed":
            return ok("already_closed", row)
        changes = {"status": "closed", "closed_at": now, "updated_at": now}
        store.update(row["id"], **changes)
        row.update(changes)
        return ok("closed", row)


def close_held_by(worker: str) -> list[str]:
    """A planned shutdown: close every session ``worker`` holds that no open run uses,
    hand the others back (``session_release.hand_back``); returns their ids."""
    held = store.held_by(worker, namespace=namespace())
    for session_id in held:
        if not hand_back(session_id, worker):
            close(session_id, worker)
    return held


def renew_for_activity(options: dict[str, Any], owner: str, *, now: dt.datetime) -> bool:
    """An in-session activity's heartbeat also renews its session's lease."""
    row = store.lock(namespace(), options.get("session_id") or "")
    if row is None:
        return False
    row = refresh(row, now)
    if row["status"] != "active" or row["lease_owner"] != owner:
        return False
    renew(row, owner, now)
    return True


def holder_queue(session_id: str, *, now: dt.datetime) -> str | None:
    """The direct queue of the session's live holder (``None``: any capable worker)."""
    row = store.get(namespace(), session_id)
    if row is None or row["status"] != "active" or not row["lease_owner"]:
        return None
    if row["lease_expires_at"] and row["lease_expires_at"] <= now:
        return None
    return owner_queue(row["lease_owner"], now=now)


@retry_transaction
def refresh_all() -> int:
    """Bring every open session's status up to date; returns how many changed."""
    now = clock.now()
    changed = 0
    with database.atomic():
        for row in store.needing_refresh(namespace(), now=now):
            locked = store.lock(row["namespace"], row["session_id"])
            if locked is not None:
                before = locked["status"], locked["failure_reason"]
                after = refresh(locked, now)
                changed += (after["status"], after["failure_reason"]) != before
    return changed


def visibility(*, status: str | None = None, limit: int = 100) -> dict[str, Any]:
    """The operator list: ``{namespace, metrics, sessions}`` after a status refresh."""
    refresh_all()
    now = clock.now()
    rows = store.listing(namespace(), status=status, limit=limit)
    holders = workers.get_many({row["lease_owner"] for row in rows if row["lease_owner"]})
    active = store.active_activity_counts([row["session_id"] for row in rows], now=now)
    return {
        "namespace": namespace(),
        "metrics": metrics(),
        "sessions": [
            snapshot(
                row,
                holder=holders.get(row["lease_owner"] or ""),
                active=active.get(row["session_id"], 0),
            )
            for row in rows
        ],
    }


def detail(session_id: str) -> dict[str, Any] | None:
    """``{namespace, session}`` for one session, or ``None``."""
    refresh_all()
    row = store.get(namespace(), session_id)
    return None if row is None else {"namespace": namespace(), "session": snapshot(row)}


def _holder_queue(task: TaskRecord, now: dt.datetime) -> str | None:
    """An in-session activity's message goes to its session holder's direct queue."""
    session_id = task.payload.get("worker_session_id") if task.payload else None
    if not session_id or task.sticky_worker_id:  # a sticky task is routed by affinity
        return None
    return holder_queue(session_id, now=now)


dispatch.add_router(_holder_queue)
