"""Python values to stored payload envelopes and back: the converter, then the codec.

Every place that turns a caller's Python value into a payload, or a payload into
the value a receiver gets, goes through these four functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.converter.decode import CLIENT, arguments_from_plain, from_plain
from durable_workflow.converter.encode import arguments_to_plain, to_plain
from durable_workflow.converter.hints import UNTYPED, Hint, Signature


def _binary(codec: str) -> bool:
    return codec != "json"  # JSON has no bytes branch: bytes travel as base64 text


def encode_value(value: Any, codec: str, root: str = "value") -> dict[str, Any]:
    """One value (a result, a side effect) as an envelope; refusals name ``root``."""
    return envelope.encode(to_plain(value, root, binary=_binary(codec)), codec)


def encode_arguments(values: Sequence[Any], codec: str) -> dict[str, Any]:
    """Positional arguments as an envelope holding a list."""
    return envelope.encode(arguments_to_plain(values, binary=_binary(codec)), codec)


def decode_value(
    env: Any,
    hint: Hint = None,
    *,
    codec: str | None = None,
    root: str = "value",
    receiver: str = CLIENT,
) -> Any:
    """An envelope's value as ``hint`` (None: as stored, tags decoded)."""
    return from_plain(envelope.decode(env, expected_codec=codec), hint, root, receiver=receiver)


def decode_arguments(
    env: Any,
    signature: Signature = UNTYPED,
    *,
    codec: str | None = None,
    receiver: str = CLIENT,
) -> list[Any]:
    """An envelope's argument list, each argument as its parameter declares."""
    values = envelope.decode(env, expected_codec=codec)
    return arguments_from_plain(values, signature, receiver=receiver)


def plain_arguments(values: Sequence[Any] | dict[str, Any], codec: str) -> Any:
    """Arguments as plain values, keeping a named map a map (for contract checks)."""
    if isinstance(values, dict):
        binary = _binary(codec)
        return {
            key: to_plain(value, f"argument {key!r}", binary=binary)
            for key, value in values.items()
        }
    return arguments_to_plain(list(values), binary=_binary(codec))
