"""Payloads for display: codec envelopes decoded and projected onto plain JSON.

Payloads that went through the codec chain (``encodings``) are decoded with the
keys this process holds; without the key, or when the operator lacks
``PAYLOAD_DECODE_PERMISSION``, the page shows a placeholder instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest
from django.utils.html import format_html

from durable_workflow.codec import chain, envelope
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import PayloadCodecError

MAX_CHARS = 20_000

_PLAIN = {"codec", "blob"}
_CHAINED = ({"codec", "encodings", "size_bytes", "blob"}, {"codec", "encodings", "size_bytes"})
_may_decode: contextvars.ContextVar[bool] = contextvars.ContextVar("dw_may_decode", default=True)


def may_decode_payloads(request: HttpRequest) -> bool:
    permission = get_settings().PAYLOAD_DECODE_PERMISSION
    return permission is None or bool(request.user.has_perm(permission))


@contextlib.contextmanager
def decoding_for(request: HttpRequest) -> Iterator[None]:
    """Within the block (render the response inside it), show payloads as ``request`` may."""
    token = _may_decode.set(may_decode_payloads(request))
    try:
        yield
    finally:
        _may_decode.reset(token)


def is_envelope(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("codec"), str):
        return False
    keys = set(value)
    if keys == _PLAIN:
        return isinstance(value.get("blob"), str)
    return chain.ENCODINGS_KEY in value and (
        keys == _CHAINED[0] or keys - _CHAINED[1] == {"external_storage"}
    )


def _placeholder(value: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"$hidden": reason, "codec": value["codec"], "encodings": value.get("encodings", [])}


def decode_for_display(value: Any) -> Any:
    """``value`` with every envelope inside it replaced by its decoded inspection JSON."""
    if is_envelope(value):
        if not _may_decode.get():
            return _placeholder(value, "payload hidden: you lack the permission to decode it")
        try:
            return envelope.to_inspection_json(envelope.decode(value))
        except chain.PayloadKeyUnavailable as exc:
            return _placeholder(value, f"encrypted with key {exc.key_id!r}, not held here")
        except PayloadCodecError as exc:
            if exc.reason == chain.UNKNOWN_ENCODING:  # e.g. encrypted, and no keys here at all
                return _placeholder(value, f"not decodable here: {exc}")
            return {"$undecodable": f"{type(exc).__name__}: {exc}", "codec": value["codec"]}
        except Exception as exc:
            return {"$undecodable": f"{type(exc).__name__}: {exc}", "codec": value["codec"]}
    if isinstance(value, dict):
        return {key: decode_for_display(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_for_display(item) for item in value]
    return value


def pretty(value: Any) -> str:
    text = json.dumps(decode_for_display(value), indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n… ({len(text) - MAX_CHARS} more characters)"
    return text


def pre(value: Any) -> str:
    return format_html('<pre class="dw-payload">{}</pre>', pretty(value))


def duration(seconds: float | None) -> str:
    """``1.234 s``, ``2 min 3 s``, ``1 h 2 min``, ``3 d 4 h``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.3f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s"
