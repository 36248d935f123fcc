"""History export: one run's durable facts as a self-checking JSON bundle.

The bundle (schema ``durable-workflow.v2.history-export``, version 1) carries
the history log plus the rows around it (commands, signals, updates,
activities and attempts, timers, tasks, failures, lineage), redaction metadata
and an ``integrity`` block. It is the input of ``workflow_replay`` and an
archive artifact; ``durable_workflow/schemas/history-export.schema.json``
describes it.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ChildCall,
    HistoryEvent,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.operations import integrity
from durable_workflow.operations.export_rows import (
    activities,
    commands,
    failures,
    fields_of,
    plain,
    signals,
    tasks,
    timers,
    updates,
)
from durable_workflow.operations.redaction import Redaction

SCHEMA = "durable-workflow.v2.history-export"
SCHEMA_VERSION = 1
ACTIONABILITY_CONTRACT = {"schema": "waterline.actionability", "version": 1}
SIGNING_KEY_ENV = "DW_V2_HISTORY_EXPORT_SIGNING_KEY"
SIGNING_KEY_ID_ENV = "DW_V2_HISTORY_EXPORT_SIGNING_KEY_ID"


class ExportError(LookupError):
    """The instance or run to export does not exist."""


def select_run(
    instance_id: str, run_id: str | None = None, *, namespace: str | None = None
) -> WorkflowRun:
    """The run to export: ``run_id`` (which must belong to the instance) or the current one;
    the instance is looked up in ``namespace`` (the default one unless given)."""
    space = namespaces.resolve(namespace)
    key = namespaces.instance_key(space, instance_id)
    if not WorkflowInstance.objects.filter(key=key).exists():
        raise ExportError(f"no workflow instance {instance_id!r} in namespace {space!r}")
    runs = WorkflowRun.objects.select_related("instance").filter(
        namespace=space, instance_id=instance_id
    )
    if run_id:
        try:
            run = runs.filter(id=uuid.UUID(str(run_id))).first()
        except ValueError:
            run = None
        if run is None:
            raise ExportError(f"instance {instance_id!r} has no run {run_id!r}")
        return run
    run = runs.order_by("-run_number").first()
    if run is None:
        raise ExportError(f"workflow instance {instance_id!r} has not started")
    return run


_RUN_FIELDS = (
    "run_number",
    "status",
    "closed_reason",
    "payload_codec",
    "queue",
    "connection",
    "business_key",
    "labels",
    "memo",
    "search_attributes",
    "execution_timeout_seconds",
    "run_timeout_seconds",
    "execution_deadline_at",
    "run_deadline_at",
    "workflow_task_sequence",
    "history_size_bytes",
    "cancel_requested_at",
    "started_at",
    "closed_at",
    "archived_at",
    "last_progress_at",
    "created_at",
)


def _workflow_block(run: WorkflowRun) -> dict[str, Any]:
    instance = run.instance
    return {
        "instance_id": instance.instance_id,
        "workflow_type": run.workflow_type,
        "workflow_class": run.workflow_class,
        "business_key": instance.business_key,
        "instance_status": instance.status,
        "current_run_id": plain(instance.current_run_id),
        "run_count": instance.run_count,
        "created_at": plain(instance.created_at),
        "source_runtime": "embedded",
    }


def _selected_run(run: WorkflowRun, redact: Redaction) -> dict[str, Any]:
    block = {"run_id": str(run.id), **fields_of(run, _RUN_FIELDS)}
    block["is_current"] = run.instance.current_run_id == run.id
    block["history_event_count"] = run.history_event_count
    block["parent_run_id"] = plain(run.parent_run_id)
    block["parent_sequence"] = run.parent_sequence
    block["continued_from_run_id"] = plain(run.continued_from_id)
    block["arguments"] = redact(
        run.arguments, path="selected_run.arguments", category="workflow_arguments"
    )
    block["output"] = (
        redact(run.output, path="selected_run.output", category="workflow_output")
        if run.output is not None
        else None
    )
    for projection in ("waits", "timeline"):
        block[f"{projection}_projection_source"] = "typed_history"
    for projection in ("timers", "lineage"):
        block[f"{projection}_projection_source"] = "durable_rows"
    return block


def _links(run: WorkflowRun) -> dict[str, Any]:
    parents = []
    if run.parent_run_id:
        parent = WorkflowRun.objects.filter(id=run.parent_run_id).first()
        if parent is not None:
            parents.append(
                {
                    "link_kind": "child",
                    "run_id": str(parent.id),
                    "instance_id": parent.instance_id,
                    "workflow_type": parent.workflow_type,
                    "parent_sequence": run.parent_sequence,
                    "parent_close_policy": run.parent_close_policy,
                }
            )
    children = [
        {
            "link_kind": "child",
            **fields_of(
                call,
                ("sequence", "child_instance_id", "child_workflow_type", "status"),
            ),
            "child_run_id": plain(call.child_run_id),
            "parent_close_policy": call.parent_close_policy,
        }
        for call in ChildCall.objects.filter(parent_run_id=run.id).order_by("sequence")
    ]
    continued_as = [
        str(pk)
        for pk in WorkflowRun.objects.filter(continued_from_id=run.id).values_list("id", flat=True)
    ]
    return {
        "projection_source": "durable_rows",
        "parents": parents,
        "children": children,
        "continued_from_run_id": plain(run.continued_from_id),
        "continued_as_run_ids": continued_as,
    }


def _history(run: WorkflowRun, redact: Redaction) -> list[dict[str, Any]]:
    rows = (
        HistoryEvent.objects.filter(run_id=run.id)
        .order_by("sequence")
        .values_list("sequence", "event_type", "payload", "recorded_at")
    )
    return [
        {
            "sequence": sequence,
            "event_type": kind,
            "recorded_at": plain(at),
            "payload": redact(
                payload,
                path=f"history_events[{index}].payload",
                category="history_event_payload",
            ),
        }
        for index, (sequence, kind, payload, at) in enumerate(rows.iterator(chunk_size=5000))
    ]


def build_bundle(
    instance_id: str,
    *,
    run_id: str | None = None,
    redactor: Any = None,
    signing_key: str | None = None,
    signing_key_id: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Export one run (the current one unless ``run_id`` is given) as a sealed bundle.

    Without an explicit ``signing_key``, the ``DW_V2_HISTORY_EXPORT_SIGNING_KEY``
    (and ``..._KEY_ID``) environment variables are used when set.
    """
    run = select_run(instance_id, run_id, namespace=namespace)
    redact = Redaction(
        redactor,
        identity={
            "workflow_instance_id": run.instance_id,
            "workflow_run_id": str(run.id),
            "workflow_type": run.workflow_type,
        },
    )
    bundle: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "exported_at": clock.now().isoformat(),
        "history_complete": run.status in TERMINAL_RUN_STATUSES,
        "workflow": _workflow_block(run),
        "selected_run": _selected_run(run, redact),
        "links": _links(run),
        "history_events": _history(run, redact),
        "commands": commands(run, redact),
        "signals": signals(run, redact),
        "updates": updates(run, redact),
        "activities": activities(run, redact),
        "timers": timers(run),
        "tasks": tasks(run, redact),
        "failures": failures(run, redact),
        "actionability_contract": dict(ACTIONABILITY_CONTRACT),
    }
    bundle["redaction"] = redact.block()
    if signing_key is None:
        signing_key = os.environ.get(SIGNING_KEY_ENV) or None
        signing_key_id = signing_key_id or os.environ.get(SIGNING_KEY_ID_ENV) or None
    return integrity.seal(bundle, signing_key=signing_key, key_id=signing_key_id)
