"""JSON responses: the command envelope, the error envelope, and status codes by outcome."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from django.http import HttpResponse

COMMAND_SOURCE = "webhook"

#: HTTP status of each durable outcome, as in the spec's matrices.
OUTCOME_STATUS = {
    "started_new": 202,
    "returned_existing_active": 200,
    "rejected_duplicate": 409,
    "signal_received": 202,
    "rejected_unknown_signal": 404,
    "rejected_unknown_update": 404,
    "rejected_invalid_arguments": 422,
    "rejected_not_started": 409,
    "rejected_not_active": 409,
    "rejected_not_current": 409,
    "rejected_pending_signal": 409,
    "structural_limit_exceeded": 409,
    "update_completed": 200,
    "update_failed": 422,
    "cancelled": 200,
    "terminated": 200,
    "repair_dispatched": 200,
    "repair_not_needed": 200,
}


def status_of(outcome: str | None, *, accepted: bool) -> int:
    return OUTCOME_STATUS.get(outcome or "", 200 if accepted else 409)


def plain(value: Any) -> Any:
    """A decoded payload value as plain JSON (bytes become ``{"$type": "bytes"}``)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return {"$type": "bytes", "base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def json_response(document: dict[str, Any], status: int) -> HttpResponse:
    return HttpResponse(
        json.dumps(plain(document), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )


def error(
    status: int,
    reason: str,
    message: str,
    errors: dict[str, list[str]] | None = None,
    **extra: Any,
) -> HttpResponse:
    """The error envelope every non-command failure uses."""
    document: dict[str, Any] = {"message": message, "reason": reason, **extra}
    if errors is not None:
        document["validation_errors"] = errors
    return json_response(document, status)


def unauthorized(reason: str = "unauthorized", message: str = "Unauthorized.") -> HttpResponse:
    response = error(401, reason, message)
    response["WWW-Authenticate"] = "Webhook"
    return response


def not_found(reason: str, message: str, **extra: Any) -> HttpResponse:
    return error(404, reason, message, **extra)


def micros_z(value: dt.datetime | None) -> str | None:
    """The update timestamps' format: ``2026-04-10T12:00:00.000000Z``."""
    if value is None:
        return None
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso(value: dt.datetime | None) -> str | None:
    """Describe's timestamp format: ``2026-04-12T12:00:00+00:00``."""
    if value is None:
        return None
    return value.astimezone(dt.UTC).replace(microsecond=0).isoformat()


def command_envelope(
    *,
    outcome: str | None,
    accepted: bool,
    workflow_id: str,
    run_id: str | None,
    command_id: str | None,
    workflow_type: str | None,
    rejection_reason: str | None,
    metadata: dict[str, Any] | None = None,
    target_scope: str = "instance",
    requested_run_id: str | None = None,
    command_sequence: int | None = None,
) -> dict[str, Any]:
    """The envelope of every command response.

    A run-targeted command on a historical run keeps ``run_id`` on that run,
    while ``resolved_run_id`` names the current run callers should use next.
    """
    metadata = metadata or {}
    resolved = metadata.get("resolved_run_id", run_id)
    requested = metadata.get("requested_run_id", requested_run_id)
    document: dict[str, Any] = {
        "outcome": outcome,
        "workflow_id": workflow_id,
        "run_id": requested if metadata.get("requested_run_id") else run_id,
        "requested_run_id": requested,
        "resolved_run_id": resolved,
        "command_id": command_id,
        "command_sequence": command_sequence,
        "target_scope": target_scope,
        "workflow_type": workflow_type,
        "command_status": "accepted" if accepted else "rejected",
        "command_source": COMMAND_SOURCE,
        "rejection_reason": None if accepted else rejection_reason,
    }
    if metadata.get("validation_errors"):
        document["validation_errors"] = metadata["validation_errors"]
    for key in ("structural_limit_kind", "structural_limit_value", "structural_limit_configured"):
        if key in metadata:
            document[key] = metadata[key]
    return document
