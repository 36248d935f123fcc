"""The engine's statement values rendered into their query's text (PostgreSQL).

psycopg's client-side binding (Django's default) parses a query of more than 50
values anew every time it binds one, and a step's last batch has well over a
hundred. :func:`bound` builds the same text with the driver's own adapters,
without parsing it: the most common types of the engine's values are rendered
here, byte for byte as psycopg renders them, the rest by psycopg itself.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any


def bound(raw: Any, text: str, params: Sequence[Any]) -> str:
    """``text`` with each ``%s`` replaced by a value and ``%%`` by ``%``: what psycopg's
    client-side binding sends. ``raw``: the driver's cursor (its adapters)."""
    from psycopg.adapt import Transformer

    adapt = Transformer.from_context(raw)
    encoding = raw.connection.info.encoding
    rendered: list[bytes] = []
    for value in params:
        render = _LITERALS.get(type(value))
        literal: bytes | None
        if render is not None:
            literal = render(value)
        elif isinstance(value, str) and not _NEEDS_ESCAPE.intersection(value):
            literal = b"'%s'" % value.encode(encoding)  # a TextChoices member included
        else:
            literal = None
        rendered.append(literal if literal is not None else adapt.as_literal(value))
    return (text.encode(encoding) % tuple(rendered)).decode(encoding)


def _datetime(value: dt.datetime) -> bytes | None:
    if value.tzinfo is None:
        return None  # a timestamp without time zone: psycopg's own dumper
    return b"'%s'::timestamptz" % str(value).encode()


def _int(value: int) -> bytes:
    return b"%d" % value if value >= 0 else b" %d" % value


_NEEDS_ESCAPE = frozenset("'\\\x00")

_LITERALS: dict[type, Callable[[Any], bytes | None]] = {
    type(None): lambda value: b"NULL",
    bool: lambda value: b"true" if value else b"false",
    int: _int,
    uuid.UUID: lambda value: b"'%s'::uuid" % value.hex.encode(),
    dt.datetime: _datetime,
}
