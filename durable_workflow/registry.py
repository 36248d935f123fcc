"""Type keys to classes, for workflows and activities.

Classes register themselves when their module is imported; the app config
imports every installed app's ``workflows`` module at start-up. Type keys are
stored in history, so a class should name its key explicitly (``type_key``)
rather than rely on the module-path default that a refactor would change.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from durable_workflow.exceptions import ConfigurationError, UnknownTypeError

T = TypeVar("T", bound=type)

_lock = threading.Lock()
_workflows: dict[str, type] = {}
_activities: dict[str, type] = {}


def default_type_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _register(table: dict[str, type], kind: str, cls: T) -> T:
    key = cls.__dict__.get("type_key") or default_type_key(cls)
    if not isinstance(key, str) or not key.strip():
        raise ConfigurationError(f"{kind} {cls!r} has an empty type_key")
    cls.type_key = key  # type: ignore[attr-defined]
    with _lock:
        existing = table.get(key)
        if existing is not None and default_type_key(existing) != default_type_key(cls):
            raise ConfigurationError(
                f"{kind} type key {key!r} is claimed by both {default_type_key(existing)} "
                f"and {default_type_key(cls)}"
            )
        table[key] = cls
    return cls


def register_workflow(cls: T) -> T:
    return _register(_workflows, "workflow", cls)


def register_activity(cls: T) -> T:
    return _register(_activities, "activity", cls)


def workflow_class(type_key: str) -> type:
    try:
        return _workflows[type_key]
    except KeyError:
        raise UnknownTypeError(
            f"no workflow is registered under type key {type_key!r}; is its module "
            "named workflows.py in an installed app, or imported at start-up?"
        ) from None


def activity_class(type_key: str) -> type:
    try:
        return _activities[type_key]
    except KeyError:
        raise UnknownTypeError(
            f"no activity is registered under type key {type_key!r}; is its module "
            "named workflows.py in an installed app, or imported at start-up?"
        ) from None


def has_activity(type_key: str) -> bool:
    return type_key in _activities


def workflows() -> dict[str, type]:
    return dict(_workflows)


def activities() -> dict[str, type]:
    return dict(_activities)
