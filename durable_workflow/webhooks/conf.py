"""Typed webhook settings, read from the ``DURABLE_WORKFLOW_WEBHOOKS`` dict.

They live beside ``DURABLE_WORKFLOW`` rather than inside it so that the core
settings stay about the engine; ``docs/reference/webhooks.md`` documents each key.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError

AUTH_METHODS = ("none", "token", "signature", "custom")


@dataclasses.dataclass(frozen=True)
class WebhookSettings:
    #: ``none``, ``token`` (shared secret in a header), ``signature`` (HMAC-SHA256 of the
    #: timestamp, method, path and body: see ``signing``) or ``custom`` (``AUTHENTICATOR``).
    AUTH_METHOD: str = "none"
    #: ``none`` answers 401 to everything unless this is true or ``settings.DEBUG`` is.
    ALLOW_UNAUTHENTICATED: bool = False
    TOKEN: str = ""
    TOKEN_HEADER: str = "Authorization"
    SIGNATURE_SECRET: str = ""
    SIGNATURE_HEADER: str = "X-Signature"
    #: How far a signature's timestamp may be from the server's clock, either way.
    SIGNATURE_TOLERANCE_SECONDS: int = 300
    #: The Django cache that remembers used signatures for that long (shared by every
    #: web process: a per-process cache lets a replay through on another process).
    SIGNATURE_REPLAY_CACHE: str = "default"
    #: Dotted path of a ``WebhookAuthenticator`` subclass, for ``custom``.
    AUTHENTICATOR: str = ""
    #: Extra exposure besides the ``webhook`` / ``webhook_alias`` class attributes:
    #: a list of type keys, or a dict ``{alias: type_key}``.
    WORKFLOWS: Any = dataclasses.field(default_factory=dict)
    #: Largest accepted request body; larger ones get 422 before anything is read.
    MAX_BODY_BYTES: int = 1024 * 1024
    #: Deepest JSON nesting accepted in a body (arrays and objects count one level each).
    MAX_JSON_DEPTH: int = 32
    #: Default wait for ``wait_for=completed`` updates (``None``: the engine's
    #: ``UPDATE_WAIT_TIMEOUT_SECONDS``), and the most a request may ask for.
    UPDATE_WAIT_TIMEOUT_SECONDS: float | None = None
    MAX_UPDATE_WAIT_SECONDS: float = 30.0
    #: How often a waiting update request polls its row (``None``: the engine's setting).
    UPDATE_POLL_INTERVAL_MS: int | None = None
    #: Longest ``reason`` accepted on cancel, terminate and repair.
    MAX_REASON_LENGTH: int = 2000
    #: Queues and connections a control-plane start may name besides the workflow's own.
    CONTROL_PLANE_QUEUES: list[str] = dataclasses.field(default_factory=list)
    CONTROL_PLANE_CONNECTIONS: list[str] = dataclasses.field(default_factory=list)


_NUMBER_KEYS = (
    "SIGNATURE_TOLERANCE_SECONDS",
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "UPDATE_WAIT_TIMEOUT_SECONDS",
    "MAX_UPDATE_WAIT_SECONDS",
    "UPDATE_POLL_INTERVAL_MS",
    "MAX_REASON_LENGTH",
)
_STRING_KEYS = (
    "AUTH_METHOD",
    "TOKEN",
    "TOKEN_HEADER",
    "SIGNATURE_SECRET",
    "SIGNATURE_HEADER",
    "SIGNATURE_REPLAY_CACHE",
    "AUTHENTICATOR",
)

_LIST_KEYS = ("CONTROL_PLANE_QUEUES", "CONTROL_PLANE_CONNECTIONS")


def _fail(message: str) -> ConfigurationError:
    return ConfigurationError(f"DURABLE_WORKFLOW_WEBHOOKS: {message}")


@functools.cache
def webhook_settings() -> WebhookSettings:
    raw: Any = getattr(django_settings, "DURABLE_WORKFLOW_WEBHOOKS", {}) or {}
    if not isinstance(raw, dict):
        raise _fail("must be a dict")
    unknown = sorted(set(raw) - {f.name for f in dataclasses.fields(WebhookSettings)})
    if unknown:
        raise _fail(f"unknown keys: {', '.join(unknown)}")
    for key in _NUMBER_KEYS:
        value = raw.get(key)
        if value is None and key in ("UPDATE_WAIT_TIMEOUT_SECONDS", "UPDATE_POLL_INTERVAL_MS"):
            continue
        if key not in raw:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(f"{key} must be a number")
        if value < 0:
            raise _fail(f"{key} must be >= 0")
    for key in _STRING_KEYS:
        if key in raw and not isinstance(raw[key], str):
            raise _fail(f"{key} must be a string")
    tolerance = raw.get("SIGNATURE_TOLERANCE_SECONDS", 1)
    if not isinstance(tolerance, int) or tolerance < 1:
        raise _fail("SIGNATURE_TOLERANCE_SECONDS must be a whole number of seconds >= 1")
    if raw.get("AUTH_METHOD", "none") not in AUTH_METHODS:
        raise _fail(f"AUTH_METHOD must be one of {', '.join(AUTH_METHODS)}")
    for key in _LIST_KEYS:
        names = raw.get(key, [])
        if not isinstance(names, list | tuple) or not all(
            isinstance(name, str) and 0 < len(name) <= 255 for name in names
        ):
            raise _fail(f"{key} must be a list of names")
    unknown_connections = sorted(
        set(raw.get("CONTROL_PLANE_CONNECTIONS", [])) - set(get_settings().CONNECTIONS)
    )
    if unknown_connections:
        raise _fail(
            "CONTROL_PLANE_CONNECTIONS names connections missing from "
            f"DURABLE_WORKFLOW['CONNECTIONS']: {', '.join(unknown_connections)}"
        )
    workflows = raw.get("WORKFLOWS", {})
    if isinstance(workflows, list | tuple):
        if not all(isinstance(key, str) and key for key in workflows):
            raise _fail("WORKFLOWS entries must be type keys")
    elif isinstance(workflows, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in workflows.items()):
            raise _fail("WORKFLOWS must map aliases to type keys")
    else:
        raise _fail("WORKFLOWS must be a list of type keys or a dict of aliases")
    lists = {key: list(raw[key]) for key in _LIST_KEYS if key in raw}
    return WebhookSettings(**{**raw, **lists})


def unauthenticated_allowed(config: WebhookSettings) -> bool:
    return bool(config.ALLOW_UNAUTHENTICATED or getattr(django_settings, "DEBUG", False))


@receiver(setting_changed)
def _reset(setting: str, **kwargs: Any) -> None:
    if setting in ("DURABLE_WORKFLOW_WEBHOOKS", "DURABLE_WORKFLOW"):
        webhook_settings.cache_clear()
