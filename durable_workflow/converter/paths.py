"""Where a value sits inside a payload, for error messages: ``argument 2 → items[3] → "when"``.

A path is built lazily as a chain of (parent, segment) pairs, so walking a payload
that converts cleanly costs one tuple per container level and no string work.
"""

from __future__ import annotations

import json
from typing import Any

from durable_workflow.exceptions import PayloadCodecError

#: One step into a value: a dict key (str), a list index (int) or an attribute (Attr).
Segment = Any
Path = tuple[Any, Segment] | None


class Attr(str):
    """A dataclass, named-tuple or model field name (shown bare, not quoted)."""

    __slots__ = ()


def child(path: Path, segment: Segment) -> Path:
    return (path, segment)


def render(root: str, path: Path) -> str:
    """The path as text, outermost first."""
    segments: list[Segment] = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    text = root
    for segment in reversed(segments):
        if isinstance(segment, Attr):
            text += f" → {segment}"
        elif isinstance(segment, int):
            text += f"[{segment}]"
        else:
            text += f" → {json.dumps(str(segment), ensure_ascii=False)}"
    return text


def type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def located_error(
    reason: str,
    root: str,
    path: Path,
    problem: str,
    advice: str = "",
    *,
    value: Any = None,
) -> PayloadCodecError:
    """A ``PayloadCodecError`` that says where, what, and what to do instead."""
    where = render(root, path)
    message = f"{where}: {problem}" + (f"; {advice}" if advice else "")
    return PayloadCodecError(
        reason, message, path=where, value_type=None if value is None else type_name(value)
    )
