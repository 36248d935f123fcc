"""Redacting payloads before a history export leaves a protected environment.

A redactor is any object with ``redact(value, context) -> value`` (or a plain
callable with that signature). ``context`` holds ``path`` (where the value sits
in the bundle), ``category`` (see ``CATEGORIES``), ``workflow_instance_id``,
``workflow_run_id`` and ``workflow_type``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from django.utils.module_loading import import_string

CATEGORIES = (
    "workflow_arguments",
    "workflow_output",
    "history_event_payload",
    "command_payload",
    "command_context",
    "signal_payload",
    "update_payload",
    "task_payload",
    "activity_payload",
    "failure_diagnostics",
)


class HistoryExportRedactor(Protocol):
    def redact(self, value: Any, context: dict[str, Any]) -> Any: ...


class Redaction:
    """Applies one redactor (or none) and remembers which paths it touched."""

    def __init__(
        self,
        redactor: HistoryExportRedactor | Callable[[Any, dict[str, Any]], Any] | None,
        *,
        identity: dict[str, Any],
    ) -> None:
        self._call: Callable[[Any, dict[str, Any]], Any] | None
        if redactor is None:
            self._call = None
        elif hasattr(redactor, "redact"):
            self._call = redactor.redact
        else:
            self._call = redactor
        self._identity = identity
        self.paths: list[str] = []
        self.policy = _name(redactor)

    def __call__(self, value: Any, *, path: str, category: str) -> Any:
        if self._call is None:
            return value
        self.paths.append(path)
        return self._call(value, {"path": path, "category": category, **self._identity})

    def block(self) -> dict[str, Any]:
        return {"applied": self._call is not None, "policy": self.policy, "paths": self.paths}


def _name(redactor: Any) -> str | None:
    if redactor is None:
        return None
    target = redactor if isinstance(redactor, type) else type(redactor)
    if callable(redactor) and not hasattr(redactor, "redact"):
        target = redactor
    return f"{target.__module__}.{getattr(target, '__qualname__', target.__class__.__name__)}"


def load_redactor(path: str) -> Any:
    """Import a redactor by dotted path; a class is instantiated without arguments."""
    obj = import_string(path)
    return obj() if isinstance(obj, type) else obj
