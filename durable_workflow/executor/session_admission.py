"""Admission to a worker session, and the row decisions every verb shares.

Admission runs after queue routing: a worker that received an in-session
activity task (or asks explicitly with ``create``) gets an operation result
whose ``reason`` and ``outcome`` are the worker-session contract's enums and
whose ``status`` is the HTTP code the contract pairs with them. It checks the
worker against the session's queue and requirements, then, under the session's
row lock, creates the session, reuses it (its holder asking again) or reacquires
it (a session whose lease expired or whose holder went silent).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.exceptions import ConfigurationError
from durable_workflow.executor.session_documents import live, namespace, snapshot
from durable_workflow.options import WorkerSessionOptions
from durable_workflow.store import sessions as store
from durable_workflow.store import workers

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


def ok(outcome: str, row: dict[str, Any], *, task_id: uuid.UUID | None = None) -> dict[str, Any]:
    return {
        "admitted": True,
        "outcome": outcome,
        "session": snapshot(row),
        "activity_task_id": str(task_id) if task_id else None,
        "status": _HTTP.get(outcome, 200),
        "reason": None,
    }


def rejected(reason: str, error: str, **context: Any) -> dict[str, Any]:
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


# ------------------------------------------------------------------ status


def refresh(row: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
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


def renew(
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
        return rejected("invalid_worker_session", str(exc))
    if worker is None:
        return rejected("worker_not_registered", "no live worker registration is asking")
    unfit = _unfit(worker, options)
    if unfit is not None:
        return unfit
    space, session_id = namespace(), options["session_id"]
    row = store.lock(space, session_id)
    if row is None:
        if not options["create_if_missing"]:
            return rejected("session_missing", f"session {session_id!r} does not exist")
        created = _create(options, worker, space=space, now=now, task_id=activity_task_id)
        if created is not None:
            return created
        row = store.lock(space, session_id)  # created concurrently: decide against it
        assert row is not None
    row = refresh(row, now)
    if row["status"] == "active":
        return _reuse(row, worker, session_id, now=now, task_id=activity_task_id)
    return _reacquire(row, options, worker, space=space, now=now, task_id=activity_task_id)


def _unfit(worker: SessionWorker, options: dict[str, Any]) -> dict[str, Any] | None:
    """The rejection of a worker that does not consume the session's queue or lacks
    one of its requirements."""
    if options.get("queue") and not worker.serves(options["queue"]):
        return rejected(
            "session_queue_mismatch",
            f"worker {worker.worker_id} does not consume queue {options['queue']!r}",
        )
    missing = worker.missing(options["requirements"])
    if missing:
        return rejected(
            "session_requirements_not_met",
            f"worker {worker.worker_id} lacks {', '.join(missing)}",
            missing_requirements=missing,
        )
    return None


def _create(
    options: dict[str, Any],
    worker: SessionWorker,
    *,
    space: str,
    now: dt.datetime,
    task_id: uuid.UUID | None,
) -> dict[str, Any] | None:
    """Create the session held by ``worker``: the answer, or ``None`` when another
    transaction created it first."""
    limited = _worker_limit(worker, now=now, space=space, exclude=None)
    if limited:
        return limited
    row = store.insert(
        namespace=space,
        session_id=options["session_id"],
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
    return None if row is None else ok("created", row, task_id=task_id)


def _reuse(
    row: dict[str, Any],
    worker: SessionWorker,
    session_id: str,
    *,
    now: dt.datetime,
    task_id: uuid.UUID | None,
) -> dict[str, Any]:
    """An active session: its holder renews it, within its activity limit."""
    if row["lease_owner"] != worker.worker_id:
        return rejected(
            "session_owned_by_another_worker",
            f"session {session_id!r} is held by {row['lease_owner']}",
            row=row,
        )
    if task_id is not None:
        running = store.running_attempts(
            session_id, now=now, owner=worker.worker_id, exclude_task_id=task_id
        )
        if running >= row["max_concurrent_activities"]:
            return rejected(
                "session_activity_limit_exceeded",
                f"session {session_id!r} already runs {running} activities",
                max_concurrent_activities=row["max_concurrent_activities"],
                row=row,
            )
    return ok("reused", renew(row, worker.worker_id, now), task_id=task_id)


def _reacquire(
    row: dict[str, Any],
    options: dict[str, Any],
    worker: SessionWorker,
    *,
    space: str,
    now: dt.datetime,
    task_id: uuid.UUID | None,
) -> dict[str, Any]:
    """A session no longer active: closed for good, or taken over by ``worker`` when
    both the session and the request allow it."""
    session_id = options["session_id"]
    if row["status"] == "closed":
        return rejected("session_closed", f"session {session_id!r} was closed", row=row)
    if (
        row["failure_reason"] == "ttl_expired"
        or not row["allow_reacquire_after_failure"]
        or not options["allow_reacquire_after_failure"]
    ):
        return rejected(
            "session_reacquire_disallowed",
            f"session {session_id!r} is {row['status']} and may not be reacquired",
            row=row,
        )
    limited = _worker_limit(worker, now=now, space=space, exclude=session_id)
    if limited:
        return limited
    return ok("reacquired", renew(row, worker.worker_id, now), task_id=task_id)


def _worker_limit(
    worker: SessionWorker, *, now: dt.datetime, space: str, exclude: str | None
) -> dict[str, Any] | None:
    limit = worker.max_concurrent_worker_sessions
    if limit is None:
        return None
    held = store.held_active_count(worker.worker_id, now=now, namespace=space, exclude=exclude)
    if limit == 0 or held >= limit:
        return rejected(
            "worker_session_limit_exceeded",
            f"worker {worker.worker_id} holds {held} of {limit} allowed sessions",
            max_concurrent_worker_sessions=limit,
        )
    return None
