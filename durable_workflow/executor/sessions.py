"""Worker sessions: one worker at a time holds a session, and runs its activities.

Admission runs after queue routing: a worker that received an in-session
activity task (or asks explicitly with ``create``) gets an operation result
whose ``reason`` and ``outcome`` are the worker-session contract's enums and
whose ``status`` is the HTTP code the contract pairs with them. Every status
change happens under the session's row lock, in the caller's transaction.

A session's status is refreshed lazily, whenever a row is read for a decision:
past its TTL it is ``expired`` for good (``ttl_expired``); past its lease it is
``expired`` (``lease_expired``); with its holder's registration silent for
``WORKER_STALE_AFTER_SECONDS`` it is ``orphaned`` (``worker_heartbeat_stale``).
The last two may be reacquired by a capable worker unless the session forbids it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.executor import dispatch
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.identity import registered_worker_id, worker_id
from durable_workflow.executor.routing import owner_queue
from durable_workflow.executor.session_documents import (
    live,
    metrics,
    namespace,
    snapshot,
)
from durable_workflow.executor.session_release import hand_back
from durable_workflow.options import WorkerSessionOptions
from durable_workflow.store import database, workers
from durable_workflow.store import sessions as store
from durable_workflow.store.records import TaskRecord

WILDCARD = "*"

_HTTP = {
    "created": 201,
    "invalid_worker_session": 422,
    "worker_not_registered": 412,
    "session_not_found": 404,
}
#: Reasons after which no later admission of the same session id can succeed.
PERMANENT_REASONS = frozenset({"session_closed", "session_reacquire_disallowed"})


@dataclasses.dataclass(frozen=True)
class SessionWorker:
    """What admission needs to know about the worker asking."""

    worker_id: str
    queues: tuple[str, ...]
    capabilities: tuple[str, ...]
    #: ``None``: no limit (the in-process worker of the testing kit).
    max_concurrent_worker_sessions: int | None

    def serves(self, queue: str) -> bool:
        return WILDCARD in self.queues or queue in self.queues

    def missing(self, requirements: list[str]) -> list[str]:
        if WILDCARD in self.capabilities:
            return []
        return [item for item in requirements if item not in self.capabilities]


def _ok(outcome: str, row: dict[str, Any], *, task_id: uuid.UUID | None = None) -> dict[str, Any]:
    return {
        "admitted": True,
        "outcome": outcome,
        "session": snapshot(row),
        "activity_task_id": str(task_id) if task_id else None,
        "status": _HTTP.get(outcome, 200),
        "reason": None,
    }


def _rejected(reason: str, error: str, **context: Any) -> dict[str, Any]:
    row = context.pop("row", None)
    result = {
        "admitted": False,
        "reason": reason,
        "status": _HTTP.get(reason, 409),
        "error": error,
        **context,
    }
    if row is not None:
        result["session"] = snapshot(row)
    return result


# ------------------------------------------------------------------ options


def normalize(options: dict[str, Any]) -> dict[str, Any]:
    """A complete options document (defaults filled), or ``ConfigurationError``."""
    if not isinstance(options, dict):
        raise ConfigurationError("worker_session options must be an object")
    known = {f.name for f in dataclasses.fields(WorkerSessionOptions)}
    values = {key: _switch(key, options[key]) for key in known if options.get(key) is not None}
    session_id = options.get("session_id")
    if not isinstance(session_id, str):
        raise ConfigurationError("worker_session needs a session_id string")
    return WorkerSessionOptions(**values).snapshot(session_id)


def _switch(key: str, value: Any) -> Any:
    # Workers talking JSON may send 0/1 and "0"/"1" for the two switches.
    switch = key in ("create_if_missing", "allow_reacquire_after_failure")
    if switch and not isinstance(value, bool) and value in (0, 1, "0", "1"):
        return str(value) == "1"
    return value


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


# ------------------------------------------------------------------ status


def _refresh(row: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """Move a locked row to the status its clocks and its holder imply."""
    changes: dict[str, Any] = {}
    open_ = row["status"] != "closed" and row["failure_reason"] != "ttl_expired"
    if open_ and row["ttl_expires_at"] and row["ttl_expires_at"] <= now:
        changes = {"status": "expired", "failure_reason": "ttl_expired"}
    if not changes and row["status"] == "active":
        if row["lease_expires_at"] and row["lease_expires_at"] <= now:
            changes = {"status": "expired", "failure_reason": "lease_expired"}
        elif not live(workers.get(row["lease_owner"] or ""), now):
            changes = {"status": "orphaned", "failure_reason": "worker_heartbeat_stale"}
    if changes:
        changes["updated_at"] = now
        store.update(row["id"], **changes)
        row.update(changes)
    return row


def _renew(
    row: dict[str, Any], owner: str, now: dt.datetime, lease_seconds: int | None = None
) -> dict[str, Any]:
    seconds = max(1, lease_seconds or row["lease_seconds"])
    changes: dict[str, Any] = {
        "status": "active",
        "lease_owner": owner,
        "lease_expires_at": now + dt.timedelta(seconds=seconds),
        "last_heartbeat_at": now,
        "failure_reason": None,
        "closed_at": None,
        "updated_at": now,
    }
    store.update(row["id"], **changes)
    row.update(changes)
    return row


# ------------------------------------------------------------------ admission


def admit(
    options: dict[str, Any],
    worker: SessionWorker | None,
    *,
    now: dt.datetime,
    activity_task_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Admit ``worker`` to the session (creating or reacquiring it); call in a transaction.

    With ``activity_task_id`` this is the admission of that in-session activity
    task, and the session's ``max_concurrent_activities`` applies.
    """
    try:
        options = normalize(options)
    except (ConfigurationError, TypeError) as exc:
        return _rejected("invalid_worker_session", str(exc))
    if worker is None:
        return _rejected("worker_not_registered", "no live worker registration is asking")
    if options.get("queue") and not worker.serves(options["queue"]):
        return _rejected(
            "session_queue_mismatch",
            f"worker {worker.worker_id} does not consume queue {options['queue']!r}",
        )
    missing = worker.missing(options["requirements"])
    if missing:
        return _rejected(
            "session_requirements_not_met",
            f"worker {worker.worker_id} lacks {', '.join(missing)}",
            missing_requirements=missing,
        )
    space, session_id = namespace(), options["session_id"]
    row = store.lock(space, session_id)
    if row is None:
        if not options["create_if_missing"]:
            return _rejected("session_missing", f"session {session_id!r} does not exist")
        limited = _worker_limit(worker, now=now, space=space, exclude=None)
        if limited:
            return limited
        row = store.insert(
            namespace=space,
            session_id=session_id,
            connection=options.get("connection"),
            queue=options.get("queue"),
            requirements=options["requirements"],
            status="active",
            lease_owner=worker.worker_id,
            lease_seconds=options["lease_seconds"],
            ttl_seconds=options["ttl_seconds"],
            lease_expires_at=now + dt.timedelta(seconds=options["lease_seconds"]),
            ttl_expires_at=now + dt.timedelta(seconds=options["ttl_seconds"]),
            max_concurrent_activities=options["max_concurrent_activities"],
            create_if_missing=options["create_if_missing"],
            allow_reacquire_after_failure=options["allow_reacquire_after_failure"],
            last_heartbeat_at=now,
            created_at=now,
            updated_at=now,
        )
        if row is not None:
            return _ok("created", row, task_id=activity_task_id)
        row = store.lock(space, session_id)  # created concurrently: decide against it
        assert row is not None
    row = _refresh(row, now)
    if row["status"] == "active":
        if row["lease_owner"] != worker.worker_id:
            return _rejected(
                "session_owned_by_another_worker",
                f"session {session_id!r} is held by {row['lease_owner']}",
                row=row,
            )
        if activity_task_id is not None:
            running = store.running_attempts(
                session_id, now=now, owner=worker.worker_id, exclude_task_id=activity_task_id
            )
            if running >= row["max_concurrent_activities"]:
                return _rejected(
                    "session_activity_limit_exceeded",
                    f"session {session_id!r} already runs {running} activities",
                    max_concurrent_activities=row["max_concurrent_activities"],
                    row=row,
                )
        return _ok("reused", _renew(row, worker.worker_id, now), task_id=activity_task_id)
    if row["status"] == "closed":
        return _rejected("session_closed", f"session {session_id!r} was closed", row=row)
    if (
        row["failure_reason"] == "ttl_expired"
        or not row["allow_reacquire_after_failure"]
        or not options["allow_reacquire_after_failure"]
    ):
        return _rejected(
            "session_reacquire_disallowed",
            f"session {session_id!r} is {row['status']} and may not be reacquired",
            row=row,
        )
    limited = _worker_limit(worker, now=now, space=space, exclude=session_id)
    if limited:
        return limited
    return _ok("reacquired", _renew(row, worker.worker_id, now), task_id=activity_task_id)


def _worker_limit(
    worker: SessionWorker, *, now: dt.datetime, space: str, exclude: str | None
) -> dict[str, Any] | None:
    limit = worker.max_concurrent_worker_sessions
    if limit is None:
        return None
    held = store.held_active_count(worker.worker_id, now=now, namespace=space, exclude=exclude)
    if limit == 0 or held >= limit:
        return _rejected(
            "worker_session_limit_exceeded",
            f"worker {worker.worker_id} holds {held} of {limit} allowed sessions",
            max_concurrent_worker_sessions=limit,
        )
    return None


# ------------------------------------------------------------------ verbs


@retry_transaction
def create(options: dict[str, Any]) -> dict[str, Any]:
    """Explicit ``create`` for a worker: ``options`` plus the asking ``worker_id``."""
    now = clock.now()
    if not isinstance(options, dict) or not isinstance(options.get("worker_id"), str):
        return _rejected("invalid_worker_session", "create needs a worker_id string")
    with database.atomic():
        worker = worker_for(options["worker_id"], now=now)
        return admit(options, worker, now=now)


@retry_transaction
def heartbeat(session_id: str, worker: str, *, lease_seconds: int | None = None) -> dict[str, Any]:
    """Explicit ``heartbeat``: the holder keeps its lease."""
    if lease_seconds is not None and (
        isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int) or lease_seconds < 1
    ):
        return _rejected("invalid_worker_session", "lease_seconds must be an integer >= 1")
    now = clock.now()
    with database.atomic():
        row = store.lock(namespace(), session_id)
        if row is None:
            return _rejected("session_not_found", f"no session {session_id!r}")
        row = _refresh(row, now)
        if row["status"] != "active":
            return _rejected("session_not_active", f"session is {row['status']}", row=row)
        if row["lease_owner"] != worker:
            return _rejected(
                "session_owner_mismatch", f"session is held by {row['lease_owner']}", row=row
            )
        return _ok("heartbeat_recorded", _renew(row, worker, now, lease_seconds))


@retry_transaction
def close(session_id: str, worker: str) -> dict[str, Any]:
    """Explicit ``close`` by the holder; closing twice is answered ``already_closed``."""
    now = clock.now()
    with database.atomic():
        row = store.lock(namespace(), session_id)
        if row is None:
            return _rejected("session_not_found", f"no session {session_id!r}")
        if row["lease_owner"] != worker:
            return _rejected(
                "session_owner_mismatch", f"session is held by {row['lease_owner']}", row=row
            )
        if row["status"] == "closed":
            return _ok("already_closed", row)
        changes = {"status": "closed", "closed_at": now, "updated_at": now}
        store.update(row["id"], **changes)
        row.update(changes)
        return _ok("closed", row)


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
    row = _refresh(row, now)
    if row["status"] != "active" or row["lease_owner"] != owner:
        return False
    _renew(row, owner, now)
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
                after = _refresh(locked, now)
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
