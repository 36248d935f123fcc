"""The payload codec chain, the Django side: built from ``settings.DURABLE_WORKFLOW`` at app start.

::

    DURABLE_WORKFLOW = {
        "PAYLOAD_CODECS": ["zlib", "aes-gcm"],       # applied in this order
        "PAYLOAD_ENCRYPTION_KEYS": {"2026-12": "<base64 of 32 random bytes>",
                                    "2026-06": "<the retired key, still decoding>"},
        "PAYLOAD_ENCRYPTION_KEY_ID": "2026-12",       # new payloads use this key
    }

Encryption needs ``pip install 'durable-workflow[encryption]'`` (``cryptography``).
Keys stay able to decrypt even when ``aes-gcm`` is not in the chain any more, so
turning encryption off does not strand the payloads written while it was on.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from durable_workflow.codec import chain
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

_KEYS = (
    "PAYLOAD_CODECS",
    "PAYLOAD_ENCRYPTION_KEYS",
    "PAYLOAD_ENCRYPTION_KEY_ID",
    "STRUCTURAL_LIMITS",
)
_applied: tuple[Any, ...] | None = None


def _snapshot(raw: Any) -> tuple[Any, ...]:
    return tuple(repr(raw.get(k)) if isinstance(raw, dict) else None for k in _KEYS)


def _max_decoded_bytes() -> int:
    limit = get_settings().limit("payload_size")
    return max(chain.DEFAULT_MAX_DECODED_BYTES, 4 * limit)


def encryption_keys() -> dict[str, bytes]:
    """``PAYLOAD_ENCRYPTION_KEYS`` as raw bytes (a dict, or a callable's dotted path)."""
    raw: Any = get_settings().PAYLOAD_ENCRYPTION_KEYS
    if isinstance(raw, str):
        try:
            raw = import_string(raw)()
        except Exception as exc:
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['PAYLOAD_ENCRYPTION_KEYS'] {raw!r}: {type(exc).__name__}: {exc}"
            ) from None
    if not isinstance(raw, dict):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['PAYLOAD_ENCRYPTION_KEYS'] must be a dict of key id -> base64 key "
            "(or the dotted path of a callable returning one)"
        )
    keys: dict[str, bytes] = {}
    for key_id, value in raw.items():
        if isinstance(value, bytes):
            keys[str(key_id)] = value
            continue
        try:
            keys[str(key_id)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['PAYLOAD_ENCRYPTION_KEYS'][{key_id!r}] is not base64"
            ) from None
    return keys


def _encryption(keys: dict[str, bytes]) -> chain.PayloadTransform:
    from durable_workflow.codec.encryption import AesGcmTransform

    current = get_settings().PAYLOAD_ENCRYPTION_KEY_ID
    if current is None and len(keys) == 1:
        current = next(iter(keys))
    try:
        return AesGcmTransform(keys, current)
    except ImportError:
        raise ConfigurationError(
            "payload encryption needs the 'cryptography' package: "
            "pip install 'durable-workflow[encryption]'"
        ) from None
    except ValueError as exc:
        raise ConfigurationError(f"DURABLE_WORKFLOW payload encryption: {exc}") from None


def _build(name: Any, keys: dict[str, bytes]) -> chain.PayloadTransform:
    size = _max_decoded_bytes()
    if name == "zlib":
        return chain.ZlibTransform(max_decoded_bytes=size)
    if name == "zstd":
        if not chain.zstd_available():
            raise ConfigurationError("the 'zstd' payload codec needs the 'zstandard' package")
        return chain.ZstdTransform(max_decoded_bytes=size)
    if name == "aes-gcm":
        if not keys:
            raise ConfigurationError(
                "the 'aes-gcm' payload codec needs DURABLE_WORKFLOW['PAYLOAD_ENCRYPTION_KEYS']"
            )
        return _encryption(keys)
    if not isinstance(name, str) or "." not in name:
        raise ConfigurationError(
            f"DURABLE_WORKFLOW['PAYLOAD_CODECS'] entry {name!r} is not 'zlib', 'zstd', "
            "'aes-gcm' or the dotted path of a transform class"
        )
    try:
        factory: Callable[[], Any] = import_string(name)
        transform = factory()
    except Exception as exc:
        raise ConfigurationError(
            f"DURABLE_WORKFLOW['PAYLOAD_CODECS'] {name!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(transform, chain.PayloadTransform):
        raise ConfigurationError(
            f"{name!r} does not build a payload transform (name, encode, decode)"
        )
    return transform


def configure_from_settings() -> None:
    """Install the chain the settings name (none by default); called from ``AppConfig.ready()``."""
    global _applied
    from django.conf import settings as django_settings

    _applied = _snapshot(getattr(django_settings, "DURABLE_WORKFLOW", {}) or {})
    names = get_settings().PAYLOAD_CODECS
    if not isinstance(names, list | tuple):
        raise ConfigurationError("DURABLE_WORKFLOW['PAYLOAD_CODECS'] must be a list")
    keys = encryption_keys()
    transforms = [_build(name, keys) for name in names]
    decoders = []
    if keys and "aes-gcm" not in names:
        decoders.append(_encryption(keys))
    if "zstd" not in names and chain.zstd_available():
        decoders.append(chain.ZstdTransform(max_decoded_bytes=_max_decoded_bytes()))
    try:
        chain.configure(transforms, decoders)
    except ValueError as exc:
        raise ConfigurationError(f"DURABLE_WORKFLOW['PAYLOAD_CODECS']: {exc}") from None


def current_key_id() -> str | None:
    """The key id new payloads are encrypted with (``None``: encryption is not configured)."""
    transform = chain.decoder("aes-gcm")
    return getattr(transform, "current_key_id", None)


@receiver(setting_changed)
def _reconfigure(setting: str, value: Any = None, **kwargs: Any) -> None:
    """``override_settings`` in tests: follow changes of the codec keys only."""
    if setting == "DURABLE_WORKFLOW" and _snapshot(value or {}) != _applied:
        get_settings.cache_clear()
        try:
            configure_from_settings()
        except ConfigurationError as exc:  # surfaces again wherever get_settings() is called
            chain.configure(())
            logger.error("payload codecs left unconfigured: %s", exc)
