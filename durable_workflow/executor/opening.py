"""A run's opening, alike for a start and a continue-as-new: the definition fingerprint
it is stamped with, its indexed search attributes and its ``WorkflowStarted`` event."""

from __future__ import annotations

import uuid
from typing import Any

from durable_workflow import registry
from durable_workflow.engine import versions
from durable_workflow.engine.events import EventType
from durable_workflow.headers import with_headers
from durable_workflow.store import visibility as visibility_store
from durable_workflow.store.records import RunRecord

Event = tuple[str, dict[str, Any]]


def definition_fingerprint(workflow_type: str) -> str:
    """The fingerprint of the class registered under ``workflow_type`` (``""`` when this
    process registers none), which ``patched()`` compares on replay."""
    try:
        return versions.definition_fingerprint(registry.workflow_class(workflow_type))
    except LookupError:
        return ""


def started_event(
    run: RunRecord,
    *,
    arguments: dict[str, Any],
    details: dict[str, Any],
    memo: dict[str, Any],
    search_attributes: dict[str, Any],
    parent_instance_id: str | None,
    headers: dict[str, str] | None,
) -> Event:
    """Stamp the new ``run`` with its definition fingerprint, index its search attributes
    and return its ``WorkflowStarted``: the run's identity, then ``details`` (what this
    kind of start adds), then what ``dw.info()`` reads."""
    fingerprint = definition_fingerprint(run.workflow_type)
    run.set(workflow_definition_fingerprint=fingerprint)
    if search_attributes:
        visibility_store.replace_attributes(run.id, _present(search_attributes))
    started = {
        "workflow_definition_fingerprint": fingerprint,
        "workflow_type": run.workflow_type,
        "workflow_class": run.workflow_class,
        "workflow_instance_id": run.instance_id,
        "workflow_run_id": str(run.id),
        "run_number": run.run_number,
        "arguments": arguments,
        "payload_codec": run.payload_codec,
        **details,
        **_info_context(
            queue=run.queue,
            memo=memo,
            search_attributes=search_attributes,
            parent_run_id=run.parent_run_id,
            parent_instance_id=parent_instance_id,
        ),
    }
    return EventType.WORKFLOW_STARTED, with_headers(started, headers)


def _info_context(
    *,
    queue: str | None,
    memo: dict[str, Any],
    search_attributes: dict[str, Any],
    parent_run_id: uuid.UUID | None,
    parent_instance_id: str | None,
) -> dict[str, Any]:
    """What ``dw.info()`` reads from ``WorkflowStarted``: routing, visibility, parent."""
    context: dict[str, Any] = {
        "queue": queue,
        "memo": dict(memo or {}),
        "search_attributes": _present(search_attributes or {}),
    }
    if parent_run_id is not None:
        context["parent_workflow_instance_id"] = parent_instance_id
        context["parent_workflow_run_id"] = str(parent_run_id)
    return context


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes that have a value (``None`` means the attribute is not set)."""
    return {k: v for k, v in attributes.items() if v is not None}
