"""The role-topology manifest of an embedded deployment (``workflow_doctor --json``)."""

from __future__ import annotations

from typing import Any

from durable_workflow.conf import Settings, get_settings

ROLES = [
    "api_ingress",
    "control_plane",
    "matching",
    "history_projection",
    "scheduler",
    "execution_plane",
]


def matching_role() -> dict[str, Any]:
    """How ready work is found and woken here: Celery messages plus a repair sweep."""
    try:
        settings = get_settings()
    except Exception:  # broken settings are the doctor's finding, not a reason to crash
        settings = Settings()
    return {
        "queue_wake_enabled": False,
        "shape": "dedicated",
        "wake_owner": "dedicated_repair_pass",
        "task_dispatch_mode": "queue",
        "partition_primitives": ["connection", "queue", "compatibility", "namespace"],
        "backpressure_model": "lease_ownership",
        "discovery_limits": {
            "poll_batch_cap": settings.REPAIR_SCAN_LIMIT,
            "workflow_task_lease_seconds": settings.WORKFLOW_TASK_LEASE_SECONDS,
            "activity_task_lease_seconds": settings.ACTIVITY_LEASE_SECONDS,
        },
    }


def topology() -> dict[str, Any]:
    return {
        "schema": "durable-workflow.v2.role-topology",
        "version": 1,
        "supported_shapes": ["embedded", "standalone_server", "split_control_execution"],
        "role_vocabulary": list(ROLES),
        "current_shape": "embedded",
        "current_process_class": "application_process",
        "current_roles": list(ROLES),
        "execution_mode": "local_queue_worker",
        "matching_role": matching_role(),
    }
