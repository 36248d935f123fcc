"""Replay an exported history against the code deployed now.

The checking itself is ``durable_workflow.testing.Replayer`` (the same check the
test suite's golden histories use); this module adds what an operator needs
around it: the bundle's schema, integrity and redaction checks, and a report
with the step, what history recorded and what the code asked for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any, Literal, TypedDict

from durable_workflow.engine.events import HistoryEvent
from durable_workflow.exceptions import NonDeterminismError, UnknownTypeError
from durable_workflow.operations import export, integrity

Status = Literal["ok", "nondeterministic", "error"]


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
    #: Where the code's diverging call was made (``file:line``), when it made one.
    call_site: str | None = None
    #: The steps history recorded just before the divergence.
    recent_steps: tuple[str, ...] = ()

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


class _Ident(TypedDict):
    """Which bundle and run a result is about (read from the bundle as written)."""

    source: str
    instance_id: str | None
    run_id: str | None
    workflow_type: str | None


def replay_bundle(
    bundle: dict[str, Any],
    *,
    source: str = "<bundle>",
    verify: bool = True,
    signing_key: str | None = None,
) -> ReplayResult:
    workflow = bundle.get("workflow") or {}
    run = bundle.get("selected_run") or {}
    ident: _Ident = {
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
    from durable_workflow.testing.replayer import Replayer

    try:
        replayed = Replayer().replay_history(bundle)
    except UnknownTypeError:
        return ReplayResult(
            status="error",
            message=f"workflow_definition_unavailable: no class is registered for "
            f"{workflow.get('workflow_type')!r}",
            events=len(events),
            **ident,
        )
    except NonDeterminismError as mismatch:
        return ReplayResult(
            status="nondeterministic",
            message=str(mismatch),
            events=len(events),
            step=mismatch.step,
            recorded=mismatch.recorded,
            requested=mismatch.requested,
            call_site=mismatch.call_site,
            recent_steps=mismatch.recent_steps,
            **ident,
        )
    except Exception as exc:
        return ReplayResult(
            status="error",
            message=f"replay stopped: {type(exc).__name__}: {exc}",
            events=len(events),
            **ident,
        )
    return ReplayResult(
        status="ok",
        message=f"replayed {replayed.events} events cleanly",
        events=replayed.events,
        **ident,
    )


def replay_instance(
    instance_id: str, *, run_id: str | None = None, namespace: str | None = None
) -> ReplayResult:
    bundle = export.build_bundle(instance_id, run_id=run_id, namespace=namespace)
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
