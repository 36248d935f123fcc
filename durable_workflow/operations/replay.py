"""Replay an exported history against the code deployed now.

The bundle's events are fed to a ``WorkflowRuntime`` of the current workflow
class in query mode (nothing is written). A ``NonDeterminismError`` names the
step, what history recorded and what the code asked for. Two more mismatches
are caught after the feed: the code finishing differently from the recorded
close, and the code asking for a step history never recorded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any, Literal

from durable_workflow import registry
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.runtime import WorkflowRuntime, describe_signature
from durable_workflow.exceptions import NonDeterminismError, UnknownTypeError
from durable_workflow.operations import export, integrity

Status = Literal["ok", "nondeterministic", "error"]

#: The close command the body produces -> the event that records it.
_CLOSE_EVENTS = {
    "CompleteWorkflow": "WorkflowCompleted",
    "FailWorkflow": "WorkflowFailed",
    "CancelWorkflow": "WorkflowCancelled",
    "ContinueAsNew": "WorkflowContinuedAsNew",
}


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    source: str
    status: Status
    message: str
    instance_id: str | None = None
    run_id: str | None = None
    workflow_type: str | None = None
    events: int = 0
    step: int | None = None
    recorded: str | None = None
    requested: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _events(bundle: dict[str, Any]) -> list[HistoryEvent]:
    seen = (bundle.get("selected_run") or {}).get("workflow_task_sequence")
    events = []
    for row in bundle.get("history_events") or []:
        if seen is not None and row["sequence"] > seen:
            break  # arrived after the last workflow task: the body never saw it
        recorded_at = row.get("recorded_at")
        events.append(
            HistoryEvent(
                sequence=int(row["sequence"]),
                event_type=row["event_type"],
                payload=row.get("payload") or {},
                recorded_at=dt.datetime.fromisoformat(recorded_at) if recorded_at else None,
            )
        )
    return events


def _refusal(bundle: dict[str, Any], verify: bool, signing_key: str | None) -> str | None:
    if bundle.get("schema") != export.SCHEMA or bundle.get("schema_version") != 1:
        return "not a durable-workflow.v2.history-export bundle (schema_version 1)"
    if verify:
        checked = integrity.verify(bundle, signing_key=signing_key)
        if not checked.valid:
            return f"integrity check failed: {checked.reason}"
    if (bundle.get("redaction") or {}).get("applied"):
        return "the bundle is redacted: its payloads cannot be replayed"
    return None


def replay_bundle(
    bundle: dict[str, Any],
    *,
    source: str = "<bundle>",
    verify: bool = True,
    signing_key: str | None = None,
) -> ReplayResult:
    workflow = bundle.get("workflow") or {}
    run = bundle.get("selected_run") or {}
    ident = {
        "source": source,
        "instance_id": workflow.get("instance_id"),
        "run_id": run.get("run_id"),
        "workflow_type": workflow.get("workflow_type"),
    }
    refusal = _refusal(bundle, verify, signing_key)
    if refusal:
        return ReplayResult(status="error", message=refusal, **ident)
    events = _events(bundle)
    if not any(e.event_type == "WorkflowStarted" for e in events):
        return ReplayResult(
            status="ok", message="nothing to replay: no workflow task has run yet", **ident
        )
    try:
        cls: Any = registry.workflow_class(str(workflow.get("workflow_type")))
    except UnknownTypeError:
        return ReplayResult(
            status="error",
            message=f"workflow_definition_unavailable: no class is registered for "
            f"{workflow.get('workflow_type')!r}",
            events=len(events),
            **ident,
        )
    runtime = WorkflowRuntime(
        factory=lambda: cls._dw_instantiate(runtime),
        workflow_id=str(workflow.get("instance_id")),
        run_id=str(run.get("run_id")),
        codec=str(run.get("payload_codec") or "avro"),
    )
    runtime.enter_query_mode()
    return _feed(runtime, events, ident)


def _feed(runtime: WorkflowRuntime, events: list[HistoryEvent], ident: dict[str, Any]) -> Any:
    from durable_workflow.executor.common import orm_guard

    try:
        with orm_guard():
            runtime.feed(events)
        mismatch = _after_feed(runtime, events)
    except NonDeterminismError as exc:
        mismatch = exc
    except Exception as exc:
        return ReplayResult(
            status="error",
            message=f"replay stopped: {type(exc).__name__}: {exc}",
            events=len(events),
            **ident,
        )
    finally:
        runtime.dispose()
    if mismatch is not None:
        return ReplayResult(
            status="nondeterministic",
            message=str(mismatch),
            events=len(events),
            step=mismatch.step,
            recorded=mismatch.recorded,
            requested=mismatch.requested,
            **ident,
        )
    return ReplayResult(
        status="ok", message=f"replayed {len(events)} events cleanly", events=len(events), **ident
    )


def _after_feed(runtime: WorkflowRuntime, events: list[HistoryEvent]) -> NonDeterminismError | None:
    """Mismatches ``feed`` cannot see: a different close, or steps beyond history."""
    last_step = max((e.step for e in events if e.step is not None), default=0)
    recorded_close = next(
        (e.event_type for e in reversed(events) if e.event_type in set(_CLOSE_EVENTS.values())),
        None,
    )
    produced = type(runtime.closed).__name__ if runtime.closed is not None else None
    produced_close = _CLOSE_EVENTS.get(produced or "")
    if runtime.step_count > last_step:
        step = last_step + 1
        issued = getattr(runtime, "_issued", {}).get(step)
        return NonDeterminismError(
            step,
            recorded_close,
            describe_signature(issued) if issued else "a new step",
            "the code asks for a step the recorded history does not hold",
        )
    if recorded_close is not None and produced_close != recorded_close:
        return NonDeterminismError(
            runtime.step_count,
            recorded_close,
            produced_close,
            "the code closes the run differently from the recorded history",
        )
    if recorded_close is None and produced_close is not None:
        return NonDeterminismError(
            runtime.step_count,
            None,
            produced_close,
            "the code closes the run where the recorded history kept waiting",
        )
    return None


def replay_instance(instance_id: str, *, run_id: str | None = None) -> ReplayResult:
    bundle = export.build_bundle(instance_id, run_id=run_id)
    return replay_bundle(bundle, source=instance_id, verify=False)


def bundle_files(path: pathlib.Path) -> Iterator[pathlib.Path]:
    """``path`` itself, or every ``*.json`` below it (sorted) when it is a folder."""
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*.json") if p.is_file())
    else:
        yield path


def replay_file(path: pathlib.Path, *, verify: bool = True) -> ReplayResult:
    try:
        bundle = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return ReplayResult(source=str(path), status="error", message=f"unreadable: {exc}")
    if not isinstance(bundle, dict):
        return ReplayResult(source=str(path), status="error", message="not a JSON object")
    key = os.environ.get(export.SIGNING_KEY_ENV) or None
    signed = "signature" in (bundle.get("integrity") or {})
    return replay_bundle(
        bundle, source=str(path), verify=verify, signing_key=key if signed else None
    )
