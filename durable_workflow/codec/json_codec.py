"""Compact JSON payload codec.

It accepts the same values as the Avro codec (same reason codes on rejection),
minus ``bytes``, which JSON has no way to carry.  The blob is the compact JSON
text itself, not base64.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, NoReturn

from durable_workflow.codec.avro import INT64_MAX, INT64_MIN, MAX_DEPTH
from durable_workflow.exceptions import PayloadCodecError

# Values are validated first, so the encoder's own cycle check would be redundant work.
_dumps = json.JSONEncoder(
    ensure_ascii=True, check_circular=False, allow_nan=False, separators=(",", ":"), sort_keys=False
).encode


_BUILTINS: tuple[type[Any], ...] = (str, int, float, dict, list)


def _check(value: Any, depth: int) -> None:
    """Raise PayloadCodecError unless ``value`` is in the shared value space."""
    cls = value.__class__
    if cls is str:
        if not value.isascii():
            value.encode()  # a lone surrogate raises UnicodeEncodeError
    elif cls is int:
        if value < INT64_MIN or value > INT64_MAX:
            raise PayloadCodecError(
                "integer_overflow", f"{value} does not fit a signed 64-bit long"
            )
    elif cls is dict or cls is list:
        if depth >= MAX_DEPTH:
            raise PayloadCodecError(
                "unsupported_value_type", f"nesting deeper than {MAX_DEPTH} (or a cycle)"
            )
        if cls is list:
            for item in value:
                _check(item, depth + 1)
            return
        for key, item in value.items():
            if key.__class__ is not str and (not isinstance(key, str) or isinstance(key, Enum)):
                raise PayloadCodecError("invalid_map_key", f"map key {key!r} is not a str")
            if not key.isascii():
                key.encode()
            _check(item, depth + 1)
    elif cls is float:
        if value - value != 0.0:
            raise PayloadCodecError("non_finite_float", f"{value!r} is not a finite double")
    elif value is None or cls is bool:
        pass
    elif cls is bytes or isinstance(value, (bytes, bytearray, memoryview)):
        raise PayloadCodecError("unsupported_value_type", "the json codec cannot carry bytes")
    elif isinstance(value, (str, int, float, dict, list)) and not isinstance(value, Enum):
        # A subclass of a supported builtin: json encodes it as the builtin.
        for base in _BUILTINS:
            if isinstance(value, base):
                _check(base(value), depth)
                return
    else:
        raise PayloadCodecError(
            "unsupported_value_type", f"{type(value).__qualname__} has no JSON value form"
        )


def encode_blob(value: Any) -> str:
    """Encode ``value`` as compact JSON text."""
    try:
        _check(value, 0)
    except UnicodeEncodeError as exc:
        raise PayloadCodecError(
            "unsupported_value_type", f"text is not valid UTF-8: {exc}"
        ) from None
    return _dumps(value)


def _bad_constant(name: str) -> NoReturn:
    raise PayloadCodecError("invalid_payload_framing", f"{name} is not a finite number")


def _parse_float(text: str) -> float:
    number = float(text)
    if number - number != 0.0:  # e.g. 1e999 overflows to inf
        _bad_constant(text)
    return number


def _parse_int(text: str) -> int:
    number = int(text)
    if number < INT64_MIN or number > INT64_MAX:
        raise PayloadCodecError(
            "invalid_payload_framing", f"{text} does not fit a signed 64-bit long"
        )
    return number


_decoder = json.JSONDecoder(
    parse_float=_parse_float, parse_int=_parse_int, parse_constant=_bad_constant
)


def decode_blob(blob: str) -> Any:
    """Decode compact JSON text produced by :func:`encode_blob`."""
    if not isinstance(blob, str):
        raise PayloadCodecError(
            "invalid_payload_framing", f"blob is {type(blob).__name__}, not str"
        )
    try:
        value = _decoder.decode(blob)
    except PayloadCodecError:
        raise
    except (ValueError, RecursionError) as exc:
        raise PayloadCodecError("invalid_payload_framing", f"bad JSON: {exc}") from None
    # Depth and escaped surrogates are rare; only pay for a full walk when the text hints at them.
    if blob.count("[") + blob.count("{") > MAX_DEPTH or "\\ud" in blob or "\\uD" in blob:
        try:
            _check(value, 0)
        except (PayloadCodecError, UnicodeEncodeError) as exc:
            raise PayloadCodecError("invalid_payload_framing", str(exc)) from None
    return value
