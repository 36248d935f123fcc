"""The worker-session documents: snapshots, per-status counts, the runtime contract.

Shapes follow ``durable_workflow/schemas/worker-sessions-runtime.schema.json``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.store import sessions as store
from durable_workflow.store import workers

STATUSES = ("active", "closed", "expired", "failed", "orphaned")


def namespace() -> str:
    return get_settings().NAMESPACE or "default"


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def live(registration: dict[str, Any] | None, now: dt.datetime) -> bool:
    stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
    return workers.is_live(registration, now=now, stale_after=stale_after)


def snapshot(
    row: dict[str, Any], *, holder: dict[str, Any] | None = None, active: int | None = None
) -> dict[str, Any]:
    """A session as the contract's ``workerSessionSnapshot``."""
    now = clock.now()
    if holder is None and row["lease_owner"]:
        holder = workers.get(row["lease_owner"])
    if active is None:
        active = store.running_attempts(row["session_id"], now=now)
    return {
        "session_id": row["session_id"],
        "namespace": row["namespace"],
        "connection": row["connection"],
        "queue": row["queue"],
        "requirements": list(row["requirements"] or []),
        "status": row["status"],
        "lease_owner": row["lease_owner"],
        "holder": _holder(holder, now) if holder else None,
        "lease_expires_at": iso(row["lease_expires_at"]),
        "ttl_expires_at": iso(row["ttl_expires_at"]),
        "closed_at": iso(row["closed_at"]),
        "failure_reason": row["failure_reason"],
        "lease_seconds": row["lease_seconds"],
        "ttl_seconds": row["ttl_seconds"],
        "max_concurrent_activities": row["max_concurrent_activities"],
        "create_if_missing": row["create_if_missing"],
        "allow_reacquire_after_failure": row["allow_reacquire_after_failure"],
        "active_activity_count": active,
        "last_heartbeat_at": iso(row["last_heartbeat_at"]),
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
    }


def _holder(registration: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    queues = registration["queues"] or []
    return {
        "worker_id": registration["worker_id"],
        "task_queue": queues[0] if queues else None,
        "queues": list(queues),
        "status": registration["status"],
        "last_heartbeat_at": iso(registration["last_heartbeat_at"]),
        "is_stale": not live(registration, now),
    }


def metrics() -> dict[str, int]:
    counts = store.counts(namespace())
    out = {status: counts.get(status, 0) for status in STATUSES}
    return {"total": sum(out.values()), **out}


def runtime_contract() -> dict[str, Any]:
    """What this engine implements, as the contract's ``workerSessionRuntimeContract``."""
    return {
        "feature": "worker_sessions",
        "contract_version": "1.0",
        "command_field": "worker_session",
        "activity_options_field": "worker_session",
        "verbs": ["create", "heartbeat", "close"],
        "lifecycle": {
            "creation": "lazy_create_on_first_admitted_activity_or_explicit_worker_create",
            "renewal": "activity_heartbeat_or_explicit_session_heartbeat",
            "close": "explicit_holder_close",
            "lease_expiry": "session_expires_when_lease_is_not_renewed",
            "ttl_expiry": "absolute_session_ttl_is_terminal_for_that_session_id",
        },
        "ownership": "single_worker_lease_owner",
        "lease": {
            "scope": "namespace_session_id",
            "owner": "registered_worker_id",
            "activity_attempt_leases_remain_independent": True,
        },
        "admission": {
            "queue_routing_first": True,
            "requires_registered_worker": True,
            "requires_capabilities": True,
            "create_if_missing_default": True,
            "allow_reacquire_after_failure_default": True,
        },
        "limits": {
            "max_concurrent_worker_sessions": "worker_registration",
            "max_concurrent_activities": "session",
        },
        "default_max_concurrent_activities": 1,
        "renewal": {"activity_heartbeat_renews_session": True, "explicit_session_heartbeat": True},
        "failure_detection": ["lease_expiry", "registered_worker_heartbeat_staleness"],
        "holder_loss": {
            "in_flight_activities_keep_at_least_once_attempt_semantics": True,
            "replacement_worker_must_reacquire_session": True,
            "process_local_state_must_be_rebuilt_after_reacquire": True,
        },
        "cancellation": {
            "workflow_cancellation_observed_through_activity_heartbeat": True,
            "session_lease_does_not_override_activity_cancel_requested": True,
            "planned_shutdown_should_close_sessions": True,
        },
        "routing": ["queue", "connection", "requirements"],
        "visibility": list(STATUSES),
        "statuses": list(STATUSES),
        "terminal_statuses": ["closed"],
        "terminal_conditions": [
            "explicit_close",
            "ttl_expired",
            "allow_reacquire_after_failure_false",
        ],
        "authoring_guidance": [
            "use_for_process_local_state_gpu_memory_or_filesystem_affinity",
            "prefer_ordinary_queued_activities_for_independent_steps",
            "prefer_one_larger_activity_for_atomic_side_effects",
        ],
    }
