"""Replay recorded histories against the current code, to catch non-deterministic changes.

A history is the document ``export_history(run_id)`` returns::

    {"workflow_type", "instance_id", "run_id", "payload_codec",
     "workflow_task_sequence",  # optional: the last event a workflow task saw
     "events": [{"sequence", "event_type", "payload", "recorded_at"}, ...]}

(the operations history-export bundle is accepted too).

``Replayer`` feeds it to a fresh ``WorkflowRuntime``, exactly as a workflow
task would, and persists nothing. It raises ``NonDeterminismError`` when the
code asks for a different step than history recorded, never reaches a
recorded step, or (for a history that the body itself closed) does not close
the same way or goes on issuing commands after history ended.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pathlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from durable_workflow import registry
from durable_workflow.engine.events import TERMINAL_EVENTS, EventType, HistoryEvent
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.exceptions import NonDeterminismError, WorkflowNotFoundError

#: How a body closes its run, and the history event that records it.
_CLOSE_EVENTS = {
    "CompleteWorkflow": EventType.WORKFLOW_COMPLETED,
    "FailWorkflow": EventType.WORKFLOW_FAILED,
    "CancelWorkflow": EventType.WORKFLOW_CANCELLED,
    "ContinueAsNew": EventType.WORKFLOW_CONTINUED_AS_NEW,
}
#: The history event a new command would have written.
_COMMAND_EVENTS = {
    "ScheduleActivity": EventType.ACTIVITY_SCHEDULED,
    "StartTimer": EventType.TIMER_SCHEDULED,
    "RecordSideEffect": EventType.SIDE_EFFECT_RECORDED,
    "OpenSignalWait": EventType.SIGNAL_WAIT_OPENED,
    "OpenConditionWait": EventType.CONDITION_WAIT_OPENED,
}


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """A history that replayed clean."""

    workflow_type: str
    instance_id: str
    run_id: str
    events: int
    steps: int
    closed_by: str | None  # the body's terminal event type, if history holds one


def export_history(run_id: str | uuid.UUID) -> dict[str, Any]:
    """A run's history as a JSON-ready document, for ``Replayer`` and golden files."""
    from durable_workflow.store import history, runs

    try:
        run = runs.get_run(uuid.UUID(str(run_id)))
    except ValueError:
        run = None
    if run is None:
        raise WorkflowNotFoundError(f"no workflow run {run_id!r}")
    return {
        "workflow_type": run.workflow_type,
        "instance_id": run.instance_id,
        "run_id": str(run.id),
        "payload_codec": run.payload_codec,
        "workflow_task_sequence": run.workflow_task_sequence,
        "events": [
            {
                "sequence": event.sequence,
                "event_type": event.event_type,
                "payload": event.payload,
                "recorded_at": event.recorded_at.isoformat() if event.recorded_at else None,
            }
            for event in history.load_history(run.id)
        ],
    }


class Replayer:
    """Replays histories with the registered workflow classes (or the ones given)."""

    def __init__(self, workflows: Mapping[str, type] | Iterable[type] | None = None) -> None:
        if workflows is None:
            self._classes: dict[str, type] = {}
        elif isinstance(workflows, Mapping):
            self._classes = dict(workflows)
        else:
            self._classes = {str(cls.type_key): cls for cls in workflows}  # type: ignore[attr-defined]

    def replay(
        self, source: Mapping[str, Any] | os.PathLike[str] | uuid.UUID | str
    ) -> ReplayResult:
        """Replay a history document, a JSON file (a path) or a recorded run (its id)."""
        if isinstance(source, Mapping):
            return self.replay_history(source)
        if isinstance(source, os.PathLike):
            return self.replay_file(source)
        return self.replay_run(source)

    def replay_file(self, path: str | os.PathLike[str]) -> ReplayResult:
        return self.replay_history(json.loads(pathlib.Path(path).read_text()))

    def replay_run(self, run_id: str | uuid.UUID) -> ReplayResult:
        return self.replay_history(export_history(run_id))

    def replay_history(self, document: Mapping[str, Any]) -> ReplayResult:
        from durable_workflow.executor.common import failure_types, orm_guard

        doc = _normalize(document)
        workflow_type = str(doc["workflow_type"])
        cls: Any = self._classes.get(workflow_type) or registry.workflow_class(workflow_type)
        events = [_event(raw) for raw in doc["events"]]
        seen = doc.get("workflow_task_sequence")
        if isinstance(seen, int):
            # Inputs recorded after the last workflow task never reached the body.
            events = [e for e in events if e.sequence <= seen]
        runtime = WorkflowRuntime(
            factory=lambda: cls._dw_instantiate(runtime),
            workflow_id=str(doc.get("instance_id") or ""),
            run_id=str(doc.get("run_id") or ""),
            codec=str(doc.get("payload_codec") or "avro"),
            workflow_class=cls,
        )
        runtime.failure_types = failure_types()
        try:
            with orm_guard():
                runtime.feed(events)
            try:
                closed_by = _check_ending(runtime, events, exact=isinstance(seen, int))
            except NonDeterminismError as divergence:
                runtime.explain(divergence)
                raise
        finally:
            runtime.dispose()
        return ReplayResult(
            workflow_type=workflow_type,
            instance_id=runtime.workflow_id,
            run_id=runtime.run_id,
            events=len(events),
            steps=runtime.step_count,
            closed_by=closed_by,
        )


def _normalize(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """Accept the operations history-export bundle as well as the plain document."""
    if "events" in document or "history_events" not in document:
        return document
    workflow = document.get("workflow") or {}
    run = document.get("selected_run") or {}
    return {
        "workflow_type": workflow.get("workflow_type"),
        "instance_id": workflow.get("instance_id"),
        "run_id": run.get("run_id"),
        "payload_codec": run.get("payload_codec"),
        "workflow_task_sequence": run.get("workflow_task_sequence"),
        "events": document["history_events"],
    }


def _event(raw: Mapping[str, Any]) -> HistoryEvent:
    recorded_at = raw.get("recorded_at")
    if isinstance(recorded_at, str):
        recorded_at = dt.datetime.fromisoformat(recorded_at)
    return HistoryEvent(
        sequence=int(raw["sequence"]),
        event_type=str(raw["event_type"]),
        payload=dict(raw.get("payload") or {}),
        recorded_at=recorded_at,
    )


def _describe(command: Any) -> str:
    kind = type(command).__name__
    name = next(
        (
            getattr(command, field)
            for field in ("activity_type", "signal_name", "condition_key", "workflow_type")
            if getattr(command, field, None)
        ),
        None,
    )
    event = str(_COMMAND_EVENTS.get(kind, kind))
    return f"{event}({name})" if name else event


def _check_ending(
    runtime: WorkflowRuntime, events: list[HistoryEvent], *, exact: bool
) -> str | None:
    """After the feed: nothing new where history is complete, and the same close.

    ``exact``: the events are precisely what the last workflow task saw, so the
    code must stop exactly where that task stopped, open or closed.
    """
    terminal = [e.event_type for e in events if e.event_type in TERMINAL_EVENTS]
    ending = terminal[-1] if terminal else None
    body_closed = ending in _CLOSE_EVENTS.values()
    new = runtime.take_commands()
    if new and (exact or body_closed):
        command = new[0]
        raise NonDeterminismError(
            getattr(command, "step", None) or runtime.step_count,
            ending if body_closed else None,
            _describe(command),
            f"history ends with {ending}, but the code goes on"
            if body_closed
            else "the code asks for a step the recorded history does not hold",
        )
    closed = _CLOSE_EVENTS.get(type(runtime.closed).__name__) if runtime.closed else None
    if body_closed and closed != ending:
        raise NonDeterminismError(
            runtime.step_count,
            ending,
            str(closed) if closed else None,
            "the code does not close the run the way history did"
            if closed
            else "the code is still waiting where history finished",
        )
    if exact and ending is None and closed is not None:
        raise NonDeterminismError(
            runtime.step_count,
            None,
            str(closed),
            "the code closes the run where history kept waiting",
        )
    return ending if body_closed else None
