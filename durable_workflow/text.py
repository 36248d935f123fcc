"""Text the engine stores, and names callers hand in.

Two rules, one per direction. Text the engine records about something that
happened (an exception's message, a traceback, a validator's complaint) is made
storable: PostgreSQL refuses NUL in text and JSON, and a lone surrogate cannot be
encoded as UTF-8 at all, so both are escaped (``\\x00``, ``\\udcff``), never
dropped, and a ``str()`` that raises is described instead. A name or string a
caller passes to a public API is checked before anything is written and refused
with ``InvalidValueError``.

Pure Python: the engine imports it.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from durable_workflow.exceptions import InvalidValueError

#: Longest signal, update, query and type names (their columns hold 255 characters).
NAME_MAX = 255
#: Longest reason a caller may give for a cancel, terminate or repair.
REASON_MAX = 4096


def check_name(value: Any, *, field: str) -> str:
    """A signal, update or query name: 1 to 255 characters, no NUL, surrogate or control."""
    return check(value, field=field, max_length=NAME_MAX)


def check_reason(value: Any, *, field: str = "reason") -> Any:
    """An optional free-text reason (``None`` or ``""`` allowed), at most 4096 characters."""
    if value is None:
        return None
    return check(value, field=field, max_length=REASON_MAX, allow_empty=True)


def storable(text: str) -> str:
    """``text`` with NUL bytes and lone surrogates escaped, storable on every database."""
    if text.isascii() and "\x00" not in text:
        return text
    text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def text_of(value: Any) -> str:
    """``str(value)`` made storable; a ``str()`` that raises gives a description instead."""
    try:
        text = str(value)
    except Exception as exc:
        return f"<unprintable {storable(type(value).__name__)}: str() raised {type(exc).__name__}>"
    return storable(text)


def problem(value: Any, *, max_length: int, allow_empty: bool = False) -> str | None:
    """Why ``value`` is not an acceptable name or short text (``None``: it is)."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value and not allow_empty:
        return "must not be empty"
    if len(value) > max_length:
        return f"must be at most {max_length} characters (got {len(value)})"
    for position, char in enumerate(value):
        if char == "\x00":
            return f"must not contain a NUL byte (position {position})"
        if "\ud800" <= char <= "\udfff":
            return f"must not contain a lone surrogate (position {position})"
        if unicodedata.category(char) == "Cc" and char not in "\t\n\r":
            return f"must not contain control character {char!r} (position {position})"
    return None


def check(value: Any, *, field: str, max_length: int, allow_empty: bool = False) -> str:
    """``value`` when it is an acceptable name or text, else ``InvalidValueError``."""
    reason = problem(value, max_length=max_length, allow_empty=allow_empty)
    if reason is not None:
        raise _refuse(field, reason)
    return str(value)


def check_json(value: Any, *, field: str, max_depth: int = 32) -> Any:
    """``value`` when every string in it (keys included) is storable JSON text; floats
    must be finite. Refuses what the database would refuse, before it is asked."""
    _walk(value, field, max_depth)
    return value


def _refuse(path: str, reason: str) -> InvalidValueError:
    return InvalidValueError(f"{path} {reason}", field=path, reason=reason)


def _walk(value: Any, path: str, depth: int) -> None:
    if depth < 0:
        raise _refuse(path, "is nested too deeply")
    if isinstance(value, str):
        reason = _json_text_problem(value)
        if reason:
            raise _refuse(path, reason)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _refuse(path, f"keys must be strings, not {type(key).__name__}")
            reason = _json_text_problem(key)
            if reason:
                raise _refuse(f"{path} key {storable(key)!r}", reason)
            _walk(item, f"{path}.{storable(key)}", depth - 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth - 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise _refuse(path, "must be a finite number")
    elif value is not None and not isinstance(value, bool | int | float):
        raise _refuse(path, f"is not a JSON value ({type(value).__name__})")


def _json_text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain a NUL byte"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "must not contain a lone surrogate"
    return None
