"""``dw.info()`` of a run, built from what its history says so far."""

from __future__ import annotations

from typing import Any

from durable_workflow.engine.ledger import DeterminismLedger
from durable_workflow.info import WorkflowInfo, frozen_mapping


def workflow_info(
    ledger: DeterminismLedger,
    visibility: dict[str, dict[str, Any]],
    *,
    workflow_id: str,
    run_id: str,
    task_attempt: int,
    headers: dict[str, str] | None = None,
) -> WorkflowInfo:
    """The run as of the event being delivered: ``WorkflowStarted``'s facts, the history
    so far, and memo and search attributes as the body's upserts left them."""
    started = ledger.started
    payload = started.payload if started is not None else {}
    return WorkflowInfo(
        instance_id=workflow_id,
        run_id=run_id,
        run_number=int(payload.get("run_number") or 1),
        workflow_type=str(payload.get("workflow_type") or ""),
        parent_instance_id=payload.get("parent_workflow_instance_id"),
        parent_run_id=payload.get("parent_workflow_run_id"),
        continued_from_run_id=payload.get("continued_from_run_id"),
        started_at=started.recorded_at if started is not None else None,
        task_attempt=task_attempt,
        history_length=ledger.history_length(),
        history_size=ledger.history_size(),
        queue=payload.get("queue"),
        memo=frozen_mapping(visibility["memo"]),
        search_attributes=frozen_mapping(visibility["search_attributes"]),
        headers=frozen_mapping(headers),
    )
