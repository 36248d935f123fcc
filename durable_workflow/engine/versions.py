"""Version markers: safe branch points for changing the code of running workflows.

Markers are keyed by change id and take no step number, so adding a
``get_version()`` call to existing code never shifts the steps of runs that
started before it.

A change point with no marker yet is *old territory* — the run gets
``DEFAULT_VERSION`` and nothing is recorded — when either

* the run's history already holds steps past the body's current position (the
  original execution went on without meeting this change point), or
* the run started on a different definition of the workflow (its recorded
  definition fingerprint differs from the current class's);

otherwise the run is executing new code for the first time, so the marker is
recorded with ``max_supported`` and that value is returned.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

from durable_workflow import text
from durable_workflow.engine.commands import RecordVersionMarker
from durable_workflow.engine.core import Core
from durable_workflow.exceptions import NonDeterminismError, VersionNotSupported

DEFAULT_VERSION = -1


@functools.cache
def definition_fingerprint(cls: type) -> str:
    """A hash of the workflow class's source (or, without source, its bytecode)."""
    try:
        material = inspect.getsource(cls).encode()
    except (OSError, TypeError):
        material = b"".join(
            getattr(getattr(value, "__code__", None), "co_code", b"")
            for value in vars(cls).values()
        )
    return "sha256:" + hashlib.sha256(material).hexdigest()[:32]


class Versions:
    """Answers ``get_version()`` / ``patched()`` for one run."""

    def __init__(self, core: Core, instance: Callable[[], Any]) -> None:
        self._core = core
        self._instance = instance  # the workflow instance, once the body built it

    def get_version(self, change_id: str, min_supported: int, max_supported: int, kind: str) -> int:
        if not isinstance(change_id, str) or not change_id.strip():
            raise ValueError("a version change id must be a non-empty string")
        text.check(change_id, field="version change id", max_length=text.NAME_MAX)
        if min_supported > max_supported:
            raise ValueError("min_supported cannot be greater than max_supported")
        ledger = self._core.ledger
        recorded = ledger.version_marker(change_id)
        if recorded is not None:
            return self._recorded_version(change_id, recorded, min_supported, max_supported, kind)
        if self._old_territory():
            if min_supported > DEFAULT_VERSION:
                raise VersionNotSupported(
                    f"change {change_id!r}: this run predates the change (version "
                    f"{DEFAULT_VERSION}), but the code supports {min_supported}..{max_supported}"
                )
            return DEFAULT_VERSION
        marker: dict[str, Any] = {
            "change_id": change_id,
            "version": max_supported,
            "min_supported": min_supported,
            "max_supported": max_supported,
            "sequence": ledger.step,
            "marker_kind": kind,
        }
        ledger.note_version(change_id, marker)
        self._core.outbox.mark(("version", change_id), RecordVersionMarker(**marker))
        return max_supported

    def _recorded_version(
        self,
        change_id: str,
        recorded: dict[str, Any],
        min_supported: int,
        max_supported: int,
        kind: str,
    ) -> int:
        version = int(recorded["version"])
        step = self._core.ledger.step
        if int(recorded.get("sequence", step)) != step:
            self._core.fail_fatally(
                NonDeterminismError(
                    step,
                    f"VersionMarkerRecorded({change_id}) at step {recorded.get('sequence')}",
                    f"get_version({change_id}) at step {step}",
                    "a change id may mark only one branch point",
                )
            )
        if recorded.get("marker_kind", kind) != kind:
            self._core.fail_fatally(
                NonDeterminismError(
                    step,
                    f"VersionMarkerRecorded({change_id}, {recorded.get('marker_kind')})",
                    f"{kind}({change_id})",
                    "patched() and get_version() cannot share a change id",
                )
            )
        if not min_supported <= version <= max_supported:
            raise VersionNotSupported(
                f"change {change_id!r}: the run recorded version {version}, but the code "
                f"supports {min_supported}..{max_supported}"
            )
        return version

    def _old_territory(self) -> bool:
        ledger = self._core.ledger
        if ledger.holds_steps_after(ledger.step):
            return True
        instance = self._instance()
        workflow_class: type = type(instance)
        current = definition_fingerprint(workflow_class) if instance else None
        started = ledger.started_fingerprint
        return bool(started and current and started != current)
