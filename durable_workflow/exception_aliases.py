"""The exception aliases of settings, installed in the engine's exception registry.

``DURABLE_WORKFLOW["EXCEPTION_TYPES"]`` maps durable type keys to exception
classes and ``DURABLE_WORKFLOW["EXCEPTION_CLASS_ALIASES"]`` maps the old dotted
paths of moved classes to the classes now (both as dotted paths). The classes
are imported here, once, from the project's own settings; what a history names
is only ever looked up (``engine.exception_types``).
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from durable_workflow.conf import get_settings
from durable_workflow.engine import exception_types
from durable_workflow.exceptions import ConfigurationError


def _classes(key: str, raw: Any) -> dict[str, type]:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"DURABLE_WORKFLOW[{key!r}] must be a dict")
    classes: dict[str, type] = {}
    for name, path in raw.items():
        if not isinstance(name, str) or not name or not isinstance(path, str):
            raise ConfigurationError(
                f"DURABLE_WORKFLOW[{key!r}] maps names to dotted paths, not {name!r}: {path!r}"
            )
        try:
            cls = import_string(path)
        except ImportError as exc:
            raise ConfigurationError(f"DURABLE_WORKFLOW[{key!r}][{name!r}]: {exc}") from None
        if not exception_types.rebuildable(cls):
            raise ConfigurationError(
                f"DURABLE_WORKFLOW[{key!r}][{name!r}]: {path} is not a subclass of Exception "
                "(with the plain 'type' metaclass)"
            )
        classes[name] = cls
    return classes


def configure_from_settings() -> exception_types.ExceptionTypes:
    """Import the configured classes and install them; called from ``AppConfig.ready()``."""
    settings = get_settings()
    types = exception_types.ExceptionTypes(
        by_type_key=_classes("EXCEPTION_TYPES", settings.EXCEPTION_TYPES),
        by_old_path=_classes("EXCEPTION_CLASS_ALIASES", settings.EXCEPTION_CLASS_ALIASES),
    )
    exception_types.configure(types)
    return types


@receiver(setting_changed)
def _reconfigure(setting: str, **kwargs: Any) -> None:
    """``override_settings`` in tests."""
    if setting == "DURABLE_WORKFLOW":
        get_settings.cache_clear()
        try:
            configure_from_settings()
        except ConfigurationError:
            exception_types.configure(exception_types.ExceptionTypes())
