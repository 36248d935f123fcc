"""Payloads for display: codec envelopes decoded and projected onto plain JSON."""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html

from durable_workflow.codec import envelope

MAX_CHARS = 20_000


def is_envelope(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"codec", "blob"}
        and isinstance(value.get("codec"), str)
        and isinstance(value.get("blob"), str)
    )


def decode_for_display(value: Any) -> Any:
    """``value`` with every envelope inside it replaced by its decoded inspection JSON."""
    if is_envelope(value):
        try:
            return envelope.to_inspection_json(envelope.decode(value))
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
