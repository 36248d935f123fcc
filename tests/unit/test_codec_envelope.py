"""JSON codec, the stored envelope, size accounting and the inspection projection."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest

from durable_workflow import codec
from durable_workflow.codec import avro, envelope, json_codec
from durable_workflow.exceptions import PayloadCodecError

VALUES: list[Any] = [
    None,
    True,
    0,
    -(2**63),
    2**63 - 1,
    7.0,
    -0.0,
    "héllo ✓",
    [],
    {},
    {"order_id": 42, "items": ["a", "b"], "ok": True},
    {"0": [1, 1.0, "1", None], "nested": {"x": [{"y": [False]}]}},
]

# Values both codecs must refuse, with the same reason.
REJECTED: list[tuple[Any, str]] = [
    (2**63, "integer_overflow"),
    ([-(2**63) - 1], "integer_overflow"),
    (math.nan, "non_finite_float"),
    ({"x": math.inf}, "non_finite_float"),
    ({1: "a"}, "invalid_map_key"),
    ([{None: 1}], "invalid_map_key"),
    ((1, 2), "unsupported_value_type"),
    ({"t": (1,)}, "unsupported_value_type"),
    ({1, 2}, "unsupported_value_type"),
    (object(), "unsupported_value_type"),
    ("\ud800", "unsupported_value_type"),
]


def reason(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(PayloadCodecError) as excinfo:
        call(*args, **kwargs)
    return excinfo.value.reason


def test_public_exports_are_frozen() -> None:
    assert sorted(codec.__all__) == [
        "decode",
        "decode_blob",
        "decode_frame",
        "encode",
        "encode_blob",
        "encode_frame",
        "encoded_size",
        "to_inspection_json",
    ]
    assert codec.encode_blob is avro.encode_blob and codec.encode is envelope.encode


# --------------------------------------------------------------------------- JSON codec


@pytest.mark.parametrize("value", VALUES)
def test_json_round_trip(value: Any) -> None:
    blob = json_codec.encode_blob(value)
    assert blob == json.dumps(value, separators=(",", ":"), allow_nan=False)
    decoded = json_codec.decode_blob(blob)
    assert decoded == value and type(decoded) is type(value)


def test_json_keeps_key_order_and_int_float_distinction() -> None:
    blob = json_codec.encode_blob({"b": 7, "a": 7.0})
    assert blob == '{"b":7,"a":7.0}'
    decoded = json_codec.decode_blob(blob)
    assert list(decoded) == ["b", "a"] and type(decoded["b"]) is int and type(decoded["a"]) is float


@pytest.mark.parametrize(("value", "why"), REJECTED)
def test_both_codecs_reject_the_same_values(value: Any, why: str) -> None:
    assert reason(json_codec.encode_blob, value) == why
    assert reason(avro.encode_blob, value) == why


def test_json_cannot_carry_bytes() -> None:
    assert reason(json_codec.encode_blob, b"x") == "unsupported_value_type"
    assert reason(json_codec.encode_blob, {"k": [b"x"]}) == "unsupported_value_type"
    assert avro.decode_blob(avro.encode_blob(b"x")) == b"x"


def test_json_nesting_limit_matches_avro() -> None:
    deep: list[Any] = []
    for _ in range(avro.MAX_DEPTH):
        deep = [deep]
    assert reason(json_codec.encode_blob, deep) == "unsupported_value_type"
    assert reason(avro.encode_blob, deep) == "unsupported_value_type"
    assert reason(json_codec.decode_blob, json.dumps(deep)) == "invalid_payload_framing"
    assert reason(json_codec.decode_blob, "[" * 100_000) == "invalid_payload_framing"


@pytest.mark.parametrize(
    "blob",
    [
        "",
        "{",
        "NaN",
        "[Infinity]",
        "-Infinity",
        "1e999",
        "9223372036854775808",
        '"\\ud800"',
        "[1]x",
    ],
)
def test_json_decode_errors_are_framing_errors(blob: str) -> None:
    assert reason(json_codec.decode_blob, blob) == "invalid_payload_framing"


def test_json_decode_rejects_non_text() -> None:
    assert reason(json_codec.decode_blob, b"[]") == "invalid_payload_framing"
    assert json_codec.decode_blob('"\\ud83d\\ude00"') == "\U0001f600"


# --------------------------------------------------------------------------- envelope


@pytest.mark.parametrize("value", [*VALUES, b"\x00\xff", {"b": [b""]}])
def test_envelope_round_trip_defaults_to_avro(value: Any) -> None:
    env = envelope.encode(value)
    assert env == {"codec": "avro", "blob": avro.encode_blob(value)}
    assert envelope.DEFAULT_CODEC == "avro"
    assert envelope.decode(env) == value
    assert envelope.decode(env, expected_codec="avro") == value


def test_envelope_json_codec() -> None:
    env = envelope.encode({"a": [1]}, codec="json")
    assert env == {"codec": "json", "blob": '{"a":[1]}'}
    assert envelope.decode(env, expected_codec="json") == {"a": [1]}
    assert set(envelope.CODECS) == {"avro", "json"}


def test_unknown_codec_on_encode() -> None:
    assert reason(envelope.encode, 1, codec="msgpack") == "unsupported_payload_codec"


@pytest.mark.parametrize(
    "env",
    [
        {"codec": "json", "blob": "[1]"},  # R6: never transcoded into an avro run
        {"codec": "msgpack", "blob": "AAAA"},
        {"blob": avro.encode_blob(1)},
        {"codec": None, "blob": avro.encode_blob(1)},
        {"codec": "avro"},
        {"codec": "avro", "blob": b"wwHioz3/VYAiNwA="},
        avro.encode_blob(1),  # a raw, untagged blob
        base64.b64decode(avro.encode_blob(1)),
        None,
        [{"codec": "avro", "blob": avro.encode_blob(1)}],
    ],
)
def test_envelope_rejections(env: Any) -> None:  # R6
    assert reason(envelope.decode, env, expected_codec="avro") == "unsupported_payload_codec"


def test_unknown_codec_without_expectation() -> None:
    assert reason(envelope.decode, {"codec": "msgpack", "blob": ""}) == "unsupported_payload_codec"
    avro_env = envelope.encode(1)
    assert reason(envelope.decode, avro_env, expected_codec="json") == "unsupported_payload_codec"


def test_envelope_surfaces_codec_errors() -> None:
    env = {"codec": "avro", "blob": "wwEdoz3/VYAiNwA="}
    assert reason(envelope.decode, env) == "unsupported_payload_schema"
    assert reason(envelope.decode, {"codec": "avro", "blob": "!!"}) == "invalid_payload_framing"


# --------------------------------------------------------------------------- size


@pytest.mark.parametrize("value", [*VALUES, b"\x00" * 1000])
def test_avro_size_is_the_raw_frame_length(value: Any) -> None:
    assert envelope.encoded_size(envelope.encode(value)) == len(avro.encode_frame(value))


def test_json_size_is_utf8_length() -> None:
    assert envelope.encoded_size(envelope.encode({"a": "é"}, codec="json")) == len(
        '{"a":"\\u00e9"}'
    )
    assert envelope.encoded_size({"codec": "json", "blob": '"é"'}) == 4


def test_size_rejections() -> None:
    assert reason(envelope.encoded_size, "raw") == "unsupported_payload_codec"
    assert reason(envelope.encoded_size, {"codec": "x", "blob": ""}) == "unsupported_payload_codec"
    bad = {"codec": "avro", "blob": "abc"}
    assert reason(envelope.encoded_size, bad) == "invalid_payload_framing"


# --------------------------------------------------------------------------- inspection


@pytest.mark.parametrize(
    ("value", "projected"),
    [
        (b"\x00\xff", {"$type": "bytes", "base64": "AP8="}),
        ({}, {"$type": "map", "entries": []}),
        ({"0": "zero"}, {"$type": "map", "entries": [{"key": "0", "value": "zero"}]}),
        (
            {"a": 1, "-5": 2},
            {"$type": "map", "entries": [{"key": "a", "value": 1}, {"key": "-5", "value": 2}]},
        ),
        ({"$type": "x"}, {"$type": "map", "entries": [{"key": "$type", "value": "x"}]}),
        ({"01": 1, "1.5": 2, "-0": 3, "1e3": 4}, {"01": 1, "1.5": 2, "-0": 3, "1e3": 4}),
        ({"99999999999999999999": 1}, {"99999999999999999999": 1}),
        ({"a": [b"", {"b": None}]}, {"a": [{"$type": "bytes", "base64": ""}, {"b": None}]}),
        ([1, 2.5, "s", True, None], [1, 2.5, "s", True, None]),
    ],
)
def test_inspection_projection(value: Any, projected: Any) -> None:
    assert envelope.to_inspection_json(value) == projected
    json.dumps(envelope.to_inspection_json(value), allow_nan=False)
