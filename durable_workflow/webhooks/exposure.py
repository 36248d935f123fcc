"""Which workflow types the webhooks reach, and under which public alias.

Nothing is exposed by default. A workflow opts in with a class attribute::

    class OrderWorkflow(Workflow):
        type_key = "order-processing"
        webhook = True                      # alias = the type key
        # or: webhook_alias = "orders"      # alias of its own (implies webhook = True)

The attribute is not inherited: a subclass is another workflow type and opts
in itself. Alternatively the project lists it in
``DURABLE_WORKFLOW_WEBHOOKS["WORKFLOWS"]`` (type keys, or ``{alias: type_key}``),
or passes ``routes(workflows=...)`` explicitly. An unexposed type answers 404
exactly as if it did not exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from durable_workflow import registry
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.webhooks.conf import webhook_settings

_ALIAS = re.compile(r"[A-Za-z0-9._:-]{1,191}")

Explicit = Mapping[str, Any] | Sequence[Any] | None


def _type_key_of(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    key = getattr(entry, "type_key", None)
    if isinstance(entry, type) and isinstance(key, str) and key:
        return key
    raise ConfigurationError(f"webhook workflows must be classes or type keys, not {entry!r}")


def _add(aliases: dict[str, str], alias: str, type_key: str) -> None:
    if not isinstance(alias, str) or not _ALIAS.fullmatch(alias):
        raise ConfigurationError(f"webhook alias {alias!r} is not URL-safe")
    existing = aliases.get(alias)
    if existing is not None and existing != type_key:
        raise ConfigurationError(
            f"webhook alias {alias!r} is claimed by both {existing!r} and {type_key!r}"
        )
    aliases[alias] = type_key


def alias_map(explicit: Explicit = None) -> dict[str, str]:
    """``{alias: type_key}`` of every exposed workflow."""
    aliases: dict[str, str] = {}
    if explicit is not None:
        entries: Any = explicit.items() if isinstance(explicit, Mapping) else explicit
        for entry in entries:
            if isinstance(entry, tuple):
                _add(aliases, entry[0], _type_key_of(entry[1]))
            else:
                key = _type_key_of(entry)
                _add(aliases, key, key)
        return aliases
    for type_key, cls in registry.workflows().items():
        # Read from the class itself: a subclass is a new type and opts in on its own.
        own = vars(cls)
        alias = own.get("webhook_alias")
        if alias:
            _add(aliases, alias, type_key)
        elif own.get("webhook") is True:
            _add(aliases, type_key, type_key)
    configured = webhook_settings().WORKFLOWS
    if isinstance(configured, dict):
        for alias, type_key in configured.items():
            _add(aliases, alias, type_key)
    else:
        for type_key in configured:
            _add(aliases, type_key, type_key)
    return aliases


def type_for_alias(alias: str, explicit: Explicit = None) -> str | None:
    return alias_map(explicit).get(alias)


def is_exposed(type_key: str, explicit: Explicit = None) -> bool:
    return type_key in alias_map(explicit).values()
