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
from typing import TYPE_CHECKING, Any

from durable_workflow import text
from durable_workflow.engine.commands import RecordVersionMarker
from durable_workflow.exceptions import NonDeterminismError, VersionNotSupported

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import WorkflowRuntime

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


class VersionsMixin:
    def _init_versions(self: WorkflowRuntime) -> None:
        self._versions: dict[str, dict[str, Any]] = {}
        self.started_fingerprint: str | None = None

    def get_version(
        self: WorkflowRuntime, change_id: str, min_supported: int, max_supported: int, kind: str
    ) -> int:
        if not isinstance(change_id, str) or not change_id.strip():
            raise ValueError("a version change id must be a non-empty string")
        text.check(change_id, field="version change id", max_length=text.NAME_MAX)
        if min_supported > max_supported:
            raise ValueError("min_supported cannot be greater than max_supported")
        recorded = self._versions.get(change_id)
        if recorded is not None:
            return self._recorded_version(change_id, recorded, min_supported, max_supported, kind)
        if self._old_territory():
            if min_supported > DEFAULT_VERSION:
                raise VersionNotSupported(
                    f"change {change_id!r}: this run predates the change (version "
                    f"{DEFAULT_VERSION}), but the code supports {min_supported}..{max_supported}"
                )
            return DEFAULT_VERSION
        marker = {
            "change_id": change_id,
            "version": max_supported,
            "min_supported": min_supported,
            "max_supported": max_supported,
            "sequence": self._step,
            "marker_kind": kind,
        }
        self._versions[change_id] = marker
        self._mark(("version", change_id), RecordVersionMarker(**marker))
        return max_supported

    def _recorded_version(
        self: WorkflowRuntime,
        change_id: str,
        recorded: dict[str, Any],
        min_supported: int,
        max_supported: int,
        kind: str,
    ) -> int:
        version = int(recorded["version"])
        if int(recorded.get("sequence", self._step)) != self._step:
            self.fail_fatally(
                NonDeterminismError(
                    self._step,
                    f"VersionMarkerRecorded({change_id}) at step {recorded.get('sequence')}",
                    f"get_version({change_id}) at step {self._step}",
                    "a change id may mark only one branch point",
                )
            )
        if recorded.get("marker_kind", kind) != kind:
            self.fail_fatally(
                NonDeterminismError(
                    self._step,
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

    def _old_territory(self: WorkflowRuntime) -> bool:
        if any(step > self._step for step in self._recorded):
            return True
        current = definition_fingerprint(type(self.instance)) if self.instance else None
        return bool(self.started_fingerprint and current and self.started_fingerprint != current)
