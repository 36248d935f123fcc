"""Headers: a small map of strings that travels with commands, activities and children.

A client command (start, signal, update, query, cancel, terminate), an activity
and a child start may carry headers. They are stored with what they travel with
(the ``WorkflowStarted``, ``SignalReceived``, ``UpdateAccepted``,
``CancelRequested`` / ``TerminateRequested`` and ``ActivityScheduled`` events,
the command row, the activity's options) and replayed from there, so workflow
code and interceptors reading them see the same values on every replay.
Interceptors use them to carry context: a tenant id, a trace parent.

Headers are caller-supplied strings: every map is checked here before anything
is written, and a map that does not fit is refused with ``InvalidHeaderError``.
Pure Python: the engine imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_workflow import text
from durable_workflow.exceptions import InvalidHeaderError

#: The most headers one map may hold.
MAX_HEADERS = 64
#: Longest header name and value, in characters.
MAX_KEY_LENGTH = 255
MAX_VALUE_LENGTH = 4096
#: Largest map, counted as the UTF-8 bytes of its names and values.
MAX_TOTAL_BYTES = 16 * 1024

Headers = dict[str, str]


def check_headers(value: Any, *, field: str = "headers") -> Headers:
    """A plain copy of ``value`` when it is an acceptable header map, else
    ``InvalidHeaderError`` (``None`` is the empty map).

    Names are 1 to 255 characters, values at most 4096; neither may hold a NUL
    byte, a lone surrogate or a control character (tab, CR and LF are allowed in
    values only).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _refuse(field, f"must map strings to strings, not {type(value).__name__}")
    if len(value) > MAX_HEADERS:
        raise _refuse(field, f"must hold at most {MAX_HEADERS} headers (got {len(value)})")
    checked: Headers = {}
    total = 0
    for key, item in value.items():
        reason = _problem(key, MAX_KEY_LENGTH, allow_empty=False) or _whitespace(key)
        if reason is not None:
            raise _refuse(field, f"name {_shown(key)} {reason}")
        reason = _problem(item, MAX_VALUE_LENGTH, allow_empty=True)
        if reason is not None:
            raise _refuse(f"{field}[{key!r}]", reason)
        total += len(key.encode()) + len(item.encode())
        checked[str(key)] = str(item)
    if total > MAX_TOTAL_BYTES:
        raise _refuse(field, f"must be at most {MAX_TOTAL_BYTES} bytes in all (got {total})")
    return checked


def merged(base: Mapping[str, str] | None, extra: Mapping[str, str] | None) -> Headers:
    """``base`` with ``extra`` laid over it (neither is changed)."""
    return {**(base or {}), **(extra or {})}


def stored(payload: Mapping[str, Any] | None) -> Headers:
    """The headers an event or row payload holds (``{}`` for one written without any)."""
    value = (payload or {}).get("headers")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def with_headers(payload: dict[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any]:
    """``payload`` with a ``headers`` entry when there are any: events written without
    headers stay exactly as they were before headers existed."""
    if headers:
        payload["headers"] = dict(headers)
    return payload


def _problem(value: Any, max_length: int, *, allow_empty: bool) -> str | None:
    # Printable ASCII (ids, trace parents) is fine as it is: skip the per-character walk,
    # which outbound interceptors would otherwise pay on every replay of every step.
    if (
        type(value) is str
        and value.isascii()
        and value.isprintable()
        and (allow_empty or value)
        and len(value) <= max_length
    ):
        return None
    return text.problem(value, max_length=max_length, allow_empty=allow_empty)


def _whitespace(name: str) -> str | None:
    """Tab, CR and LF are fine in a value, never in a name."""
    for position, char in enumerate(name):
        if char in "\t\r\n":
            return f"must not contain control character {char!r} (position {position})"
    return None


def _shown(key: Any) -> str:
    return repr(text.text_of(key)) if isinstance(key, str) else f"of type {type(key).__name__}"


def _refuse(field: str, reason: str) -> InvalidHeaderError:
    return InvalidHeaderError(f"{field} {reason}", field=field, reason=reason)
