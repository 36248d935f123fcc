"""Rules for memo and search-attribute entries (shared by StartOptions and the upserts)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from durable_workflow import text
from durable_workflow.exceptions import ConfigurationError, InvalidValueError

_MEMO_KEY_MAX = 64
_ATTRIBUTE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
ATTRIBUTE_STRING_MAX = 191


class InvalidVisibilityError(ConfigurationError, InvalidValueError):
    """A memo or search-attribute entry breaks the key or value rules."""


def check_memo(entries: Any) -> dict[str, Any]:
    """Keys 1..64 characters; values JSON data (None deletes the key on upsert).

    Values go through the data converter first (bytes as base64 text), so a
    datetime, a Decimal or a dataclass is kept in its tagged JSON shape.
    """
    from durable_workflow.converter import to_plain
    from durable_workflow.exceptions import PayloadCodecError

    if not isinstance(entries, dict):
        raise InvalidVisibilityError("memo entries must be a dict")
    try:
        entries = {
            key: to_plain(value, f"memo {key!r}", binary=False) if isinstance(key, str) else value
            for key, value in entries.items()
        }
    except PayloadCodecError as exc:
        raise InvalidVisibilityError(
            f"memo value {exc.path} is not storable: {exc}", field="memo", reason=str(exc)
        ) from None
    for key, value in entries.items():
        if text.problem(key, max_length=_MEMO_KEY_MAX) is not None:
            raise InvalidVisibilityError(
                f"memo keys must be 1 to 64 characters, none of them NUL, a lone surrogate "
                f"or a control character, got {key!r}"
            )
        try:
            text.check_json(value, field=f"memo[{key!r}]")
        except InvalidValueError as exc:
            raise InvalidVisibilityError(
                f"memo value for {key!r} is not plain JSON data: {exc.reason}"
            ) from None
    return dict(sorted(entries.items()))


def check_search_attributes(attributes: Any) -> dict[str, Any]:
    """Keys 1..64 of letters, digits, '-', '_'; values str (<= 191), int, float, bool or None."""
    if not isinstance(attributes, dict):
        raise InvalidVisibilityError("search attributes must be a dict")
    for key, value in attributes.items():
        if not isinstance(key, str) or not _ATTRIBUTE_KEY.fullmatch(key):
            raise InvalidVisibilityError(
                f"search attribute keys must be 1 to 64 letters, digits, '-' or '_': {key!r}"
            )
        if isinstance(value, str):
            reason = text.problem(value, max_length=ATTRIBUTE_STRING_MAX, allow_empty=True)
            if reason is not None and len(value) <= ATTRIBUTE_STRING_MAX:
                raise InvalidVisibilityError(f"search attribute {key!r} {reason}")
            if len(value) > ATTRIBUTE_STRING_MAX:
                raise InvalidVisibilityError(
                    f"search attribute {key!r} is longer than {ATTRIBUTE_STRING_MAX} characters"
                )
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidVisibilityError(f"search attribute {key!r} must be a finite number")
        elif value is not None and not isinstance(value, bool | int | float):
            raise InvalidVisibilityError(
                f"search attribute {key!r} must be a string, number, boolean or None"
            )
    return dict(sorted(attributes.items()))


def check_labels(labels: Any) -> dict[str, str]:
    """Keys and values are strings of at most 255 characters (keys not empty), none of
    them holding a NUL byte, a lone surrogate or a control character."""
    if not isinstance(labels, dict):
        raise InvalidVisibilityError("labels must map strings to strings")
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidVisibilityError("labels must map strings to strings")
        reason = text.problem(key, max_length=255) or text.problem(
            value, max_length=255, allow_empty=True
        )
        if reason is not None:
            raise InvalidVisibilityError(f"label {key!r}: {reason}")
    return dict(labels)


def check_business_key(key: Any) -> str | None:
    """``None``, or a string of at most 255 characters without NUL, surrogate or control."""
    if key is None:
        return None
    reason = text.problem(key, max_length=255, allow_empty=True)
    if reason is not None:
        raise InvalidVisibilityError(f"business_key {reason}")
    return str(key)


def merge(current: dict[str, Any], entries: dict[str, Any]) -> dict[str, Any]:
    merged = {**current, **entries}
    return {k: v for k, v in sorted(merged.items()) if v is not None}


def encoded_size(entries: dict[str, Any]) -> int:
    return len(json.dumps(entries, separators=(",", ":"), sort_keys=True).encode())
