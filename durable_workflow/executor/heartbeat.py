"""Activity heartbeats: prove the attempt is alive and renew its lease."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from django.db import transaction

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import ActivityCancelled
from durable_workflow.executor import lifecycle
from durable_workflow.executor.common import retry_when_locked
from durable_workflow.models import TERMINAL_RUN_STATUSES
from durable_workflow.store import activities, runs, tasks

if TYPE_CHECKING:
    from durable_workflow.executor.activity_task import Lease


def _progress(details: Any) -> dict[str, Any] | None:
    if details is None:
        return None
    if not isinstance(details, dict):
        raise TypeError("heartbeat details must be a dict or None")
    json.dumps(details)  # must be plain JSON data
    return dict(sorted(details.items())) or None


def heartbeat(lease: Lease, details: Any = None) -> bool:
    """Renew the lease and record the heartbeat.

    Returns False (and writes nothing) when this attempt no longer owns its task.
    Raises ``ActivityCancelled`` when the run was cancelled or has closed, so the
    activity can stop; that exception escapes ``except Exception`` on purpose.
    """
    outcome = _record(lease, _progress(details))
    if outcome == "cancelled":
        raise ActivityCancelled("the workflow run was cancelled or has closed")
    return outcome == "recorded"


@retry_when_locked
def _record(lease: Lease, progress: dict[str, Any] | None) -> str:
    now = clock.now()
    until = now + dt.timedelta(seconds=get_settings().ACTIVITY_LEASE_SECONDS)
    with transaction.atomic():
        run = runs.lock_run(lease.run_id)
        if run is None or run.status in TERMINAL_RUN_STATUSES or run.cancel_requested_at:
            return "cancelled"
        if not tasks.renew_lease(lease.task_id, lease.lease_id, lease.generation, until=until):
            return "stale"
        activities.record_heartbeat(lease.execution.id, lease.attempt_id, now=now, until=until)
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
