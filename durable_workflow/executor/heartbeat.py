"""Activity heartbeats: prove the attempt is alive and renew its lease."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import TYPE_CHECKING, Any

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import ActivityCancelled, DurableWorkflowError
from durable_workflow.executor import lifecycle, sessions
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.identity import worker_id
from durable_workflow.models import TERMINAL_RUN_STATUSES
from durable_workflow.store import activities, database, runs, tasks

if TYPE_CHECKING:
    from durable_workflow.executor.attempts import Lease


_DETAIL_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_PROGRESS_KEYS = {"message", "current", "total", "unit", "details"}


class HeartbeatProgressError(DurableWorkflowError, ValueError):
    """Heartbeat progress does not follow the documented shape."""


def _number(name: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HeartbeatProgressError(f"Heartbeat progress {name} must be a number.")
    if not math.isfinite(value) or value < 0:
        raise HeartbeatProgressError(f"Heartbeat progress {name} must be finite and >= 0.")
    return int(value) if float(value).is_integer() else value


def check_progress(details: Any) -> dict[str, Any] | None:
    """Validate and normalise heartbeat progress (message, current/total/unit, details)."""
    if details is None:
        return None
    if not isinstance(details, dict):
        raise HeartbeatProgressError("Heartbeat progress must be a dict or None.")
    unknown = sorted(set(details) - _PROGRESS_KEYS)
    if unknown:
        raise HeartbeatProgressError(f"Heartbeat progress has unknown keys: {', '.join(unknown)}.")
    out: dict[str, Any] = {}
    if "message" in details:
        message = details["message"]
        if not isinstance(message, str) or not message.strip() or len(message) > 280:
            raise HeartbeatProgressError(
                "Heartbeat progress message must be a non-empty string of at most 280 characters."
            )
        out["message"] = message
    for name in ("current", "total"):
        if details.get(name) is not None:
            out[name] = _number(name, details[name])
    if details.get("unit") is not None:
        unit = details["unit"]
        if not isinstance(unit, str) or not unit or len(unit) > 64:
            raise HeartbeatProgressError("Heartbeat progress unit must be 1 to 64 characters.")
        if "current" not in out and "total" not in out:
            raise HeartbeatProgressError("Heartbeat progress unit needs current or total.")
        out["unit"] = unit
    if details.get("details"):
        out["details"] = _details(details["details"])
    return out or None


def _details(values: Any) -> dict[str, Any]:
    if not isinstance(values, dict) or len(values) > 20:
        raise HeartbeatProgressError("Heartbeat progress details must be a dict of at most 20.")
    clean: dict[str, Any] = {}
    for key in sorted(values):
        value = values[key]
        if not isinstance(key, str) or not _DETAIL_KEY.fullmatch(key):
            raise HeartbeatProgressError(f"Heartbeat progress detail key {key!r} is not allowed.")
        if isinstance(value, str):
            if not value or len(value) > 191:
                raise HeartbeatProgressError(
                    f"Heartbeat progress detail {key} must be 1 to 191 characters."
                )
        elif isinstance(value, float):
            value = _number(f"detail {key}", value) if value >= 0 else value
            if not math.isfinite(value):
                raise HeartbeatProgressError(f"Heartbeat progress detail {key} must be finite.")
        elif value is not None and not isinstance(value, bool | int):
            raise HeartbeatProgressError(f"Heartbeat progress detail {key} must be a scalar.")
        clean[key] = value
    return clean


def heartbeat(lease: Lease, details: Any = None) -> bool:
    """Renew the lease and record the heartbeat.

    Returns False (and writes nothing) when this attempt no longer owns its task.
    Raises ``ActivityCancelled`` when the run was cancelled or has closed, so the
    activity can stop; that exception escapes ``except Exception`` on purpose.
    """
    outcome = _record(lease, check_progress(details))
    if outcome == "cancelled":
        raise ActivityCancelled("the workflow run was cancelled or has closed")
    return outcome == "recorded"


@retry_transaction
def _record(lease: Lease, progress: dict[str, Any] | None) -> str:
    now = clock.now()
    until = now + dt.timedelta(seconds=get_settings().ACTIVITY_LEASE_SECONDS)
    with database.atomic():
        run = runs.lock_run(lease.run_id)
        if run is None or run.status in TERMINAL_RUN_STATUSES:
            return "cancelled"
        if run.cancel_requested_at and lease.execution.scheduled_at < run.cancel_requested_at:
            return "cancelled"  # clean-up started after the cancel keeps running
        if not tasks.renew_lease(lease.task_id, lease.lease_id, lease.generation, until=until):
            return "stale"
        session = lease.execution.options.get("worker_session")
        if session:
            sessions.renew_for_activity(session, worker_id(), now=now)
        activities.record_heartbeat(
            lease.execution.id,
            lease.attempt_id,
            now=now,
            until=until,
            progress=progress,
            heartbeat_timeout=lease.execution.options.get("heartbeat_timeout"),
        )
        payload: dict[str, Any] = {
            "sequence": lease.execution.sequence,
            "activity_execution_id": str(lease.execution.id),
            "activity_attempt_id": str(lease.attempt_id),
            "heartbeat_at": now.isoformat(),
            "lease_expires_at": until.isoformat(),
        }
        if progress:
            payload["progress"] = progress
        lifecycle.append(run, [(EventType.ACTIVITY_HEARTBEAT_RECORDED, payload)], now=now)
        runs.save_run(run, now=now)
    return "recorded"
