"""Avro Value protocol v1: golden vectors, value policy, strict decoding, fastavro parity."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import io
import json
import math
import uuid
from collections import OrderedDict
from typing import Any

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from durable_workflow.codec import avro
from durable_workflow.exceptions import PayloadCodecError

HEADER_B64 = "wwHioz3/VYAiN"

GOLDEN: list[tuple[str, Any, str]] = [
    ("null", None, "wwHioz3/VYAiNwA="),
    ("false", False, "wwHioz3/VYAiNwIA"),
    ("true", True, "wwHioz3/VYAiNwIB"),
    ("long", 7, "wwHioz3/VYAiNwQO"),
    ("long_min", -(2**63), "wwHioz3/VYAiNwT///////////8B"),
    ("long_max", 2**63 - 1, "wwHioz3/VYAiNwT+//////////8B"),
    ("double", 7.0, "wwHioz3/VYAiNwYAAAAAAAAcQA=="),
    ("negative_zero", -0.0, "wwHioz3/VYAiNwYAAAAAAAAAgA=="),
    ("bytes", b"\x00\xff", "wwHioz3/VYAiNwgEAP8="),
    ("string", "héllo", "wwHioz3/VYAiNwoMaMOpbGxv"),
    (
        "array",
        [None, True, 7, 7.0, b"\x00\xff", "text"],
        "wwHioz3/VYAiNwwMAAIBBA4GAAAAAAAAHEAIBAD/Cgh0ZXh0AA==",
    ),
    ("map", {"a": 1, "b": [False]}, "wwHioz3/VYAiNw4EAmEEAgJiDAICAAAA"),
    ("empty_map", {}, "wwHioz3/VYAiNw4A"),
    ("numeric_key_map", {"0": "zero"}, "wwHioz3/VYAiNw4CAjAKCHplcm8A"),
    (
        "nested",
        {"items": [{"enabled": True}, b"bytes", -2.5]},
        "wwHioz3/VYAiNw4CCml0ZW1zDAYOAg5lbmFibGVkAgEACApieXRlcwYAAAAAAAAEwAAA",
    ),
]

MALFORMED = [
    "",
    "JSUl",
    "wwE=",
    "wwHioz3/VYAiNw==",
    "wwHioz3/VYAiNwI=",
    "wwHioz3/VYAiNwQ=",
    "wwHioz3/VYAiNwY=",
    "wwHioz3/VYAiNwg=",
    "wwHioz3/VYAiNwo=",
    "wwHioz3/VYAiNww=",
    "wwHioz3/VYAiNw4=",
    "wwHioz3/VYAiNwAA",
    "wwHioz3/VYAiNxA=",
    "wwHioz3/VYAiNwwCDgICeAYAAAAAAAD4fwAA",
    "wwHioz3/VYAiNwwCDgICeAYAAAAAAADwfwAA",
    "wwHioz3/VYAiNwwCDgICeAYAAAAAAADw/wAA",
    "wwHioz3/VYAiNwwCDgICeAoC/wAA",
    base64.b64encode(b"\x00legacy-wrapper").decode(),
]

ALT_MAP_ORDERS = (
    "wwHioz3/VYAiNw4ECm91dGVyDAIOBAhsZWZ0BAIKcmlnaHQIAngAAAh0YWlsCghkb25lAA==",
    "wwHioz3/VYAiNw4ECHRhaWwKCGRvbmUKb3V0ZXIMAg4ECnJpZ2h0CAJ4CGxlZnQEAgAAAA==",
)

CANONICAL_FORM = (
    '{"name":"durable_workflow.protocol.Value","type":"record","fields":[{"name":"value","type":'
    '["null",{"name":"durable_workflow.protocol.BooleanValue","type":"record","fields":[{"name":'
    '"boolean","type":"boolean"}]},{"name":"durable_workflow.protocol.LongValue","type":"record",'
    '"fields":[{"name":"long","type":"long"}]},{"name":"durable_workflow.protocol.DoubleValue",'
    '"type":"record","fields":[{"name":"double","type":"double"}]},{"name":"durable_workflow.'
    'protocol.BytesValue","type":"record","fields":[{"name":"bytes","type":"bytes"}]},{"name":'
    '"durable_workflow.protocol.StringValue","type":"record","fields":[{"name":"string","type":'
    '"string"}]},{"name":"durable_workflow.protocol.ArrayValue","type":"record","fields":[{"name":'
    '"items","type":{"type":"array","items":"durable_workflow.protocol.Value"}}]},{"name":'
    '"durable_workflow.protocol.MapValue","type":"record","fields":[{"name":"entries","type":{"'
    'type":"map","values":"durable_workflow.protocol.Value"}}]}]}]}'
)

ROUND_TRIP_VALUES: list[Any] = [
    {"order_id": 42, "items": ["a", "b"], "ok": True},
    [[[]], {}, [{}], {"": ""}],
    {"deep": {"er": {"est": [1, -1, 0, 2**40, -(2**40), 1.5e300, -1e-300, 0.0]}}},
    ["", "ünïcödé ✓ 🎉", "\x00", b"", bytes(range(256))],
    {"k" * 300: "v" * 5000, "list": list(range(-70, 70))},
    [True, False, None, 1, 1.0, "1", b"1", [1], {"1": 1}],
]


def tagged(value: Any) -> dict[str, Any]:
    """The fastavro datum for a value, with explicit union branches (tuple notation)."""
    ns = "durable_workflow.protocol."
    if value is None:
        return {"value": None}
    if isinstance(value, bool):
        return {"value": (ns + "BooleanValue", {"boolean": value})}
    if isinstance(value, int):
        return {"value": (ns + "LongValue", {"long": value})}
    if isinstance(value, float):
        return {"value": (ns + "DoubleValue", {"double": value})}
    if isinstance(value, bytes):
        return {"value": (ns + "BytesValue", {"bytes": value})}
    if isinstance(value, str):
        return {"value": (ns + "StringValue", {"string": value})}
    if isinstance(value, list):
        return {"value": (ns + "ArrayValue", {"items": [tagged(v) for v in value]})}
    entries = {k: tagged(v) for k, v in value.items()}
    return {"value": (ns + "MapValue", {"entries": entries})}


def untagged(datum: dict[str, Any]) -> Any:
    inner = datum["value"]
    if inner is None:
        return None
    ((key, value),) = inner.items()
    if key == "items":
        return [untagged(v) for v in value]
    if key == "entries":
        return {k: untagged(v) for k, v in value.items()}
    return value


def assert_same(actual: Any, expected: Any) -> None:
    """Equal, with exactly the same Python types all the way down (and the sign of zero)."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            assert_same(actual[key], expected[key])
    elif isinstance(expected, float):
        assert actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    else:
        assert actual == expected


def reason_of(excinfo: pytest.ExceptionInfo[PayloadCodecError]) -> str:
    return excinfo.value.reason


@pytest.mark.parametrize(
    ("value", "wire"), [(v, w) for _, v, w in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_golden_encodes_exactly(value: Any, wire: str) -> None:
    assert avro.encode_blob(value) == wire


@pytest.mark.parametrize(
    ("value", "wire"), [(v, w) for _, v, w in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_golden_decodes_exactly(value: Any, wire: str) -> None:
    assert_same(avro.decode_blob(wire), value)


@pytest.mark.parametrize("value", [g[1] for g in GOLDEN] + ROUND_TRIP_VALUES)
def test_frame_header_and_fastavro_parity(value: Any) -> None:
    frame = avro.encode_frame(value)
    assert frame[:10] == bytes.fromhex("c301e2a33dff55802237")  # R7
    assert avro.encode_blob(value).startswith(HEADER_B64)
    reference = io.BytesIO()
    schemaless_writer(reference, avro.PARSED_SCHEMA, tagged(value))
    assert frame[10:] == reference.getvalue()
    decoded = schemaless_reader(io.BytesIO(frame[10:]), avro.PARSED_SCHEMA, avro.PARSED_SCHEMA)
    assert isinstance(decoded, dict)
    assert_same(untagged(decoded), avro.decode_frame(frame))


@pytest.mark.parametrize("blob", MALFORMED)
def test_malformed_frames_are_framing_errors(blob: str) -> None:
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_blob(blob)
    assert reason_of(excinfo) == "invalid_payload_framing"


def test_unknown_fingerprint_is_unsupported_schema() -> None:
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_blob("wwEdoz3/VYAiNwA=")
    assert reason_of(excinfo) == "unsupported_payload_schema"


def test_alternate_map_orders_decode_equal() -> None:
    first, second = (avro.decode_blob(blob) for blob in ALT_MAP_ORDERS)
    assert first == second == {"outer": [{"left": 1, "right": b"x"}], "tail": "done"}


def test_fingerprint_is_crc64_of_canonical_form() -> None:
    canonical = to_parsing_canonical_form(json.loads(avro.SCHEMA_JSON))
    assert canonical == CANONICAL_FORM
    assert bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")) == avro.FINGERPRINT
    assert avro.MAGIC + avro.FINGERPRINT == avro.HEADER


def test_schema_text_is_one_compact_line() -> None:
    parsed = json.loads(avro.SCHEMA_JSON)
    assert json.dumps(parsed, separators=(",", ":")) == avro.SCHEMA_JSON
    branches = [b if isinstance(b, str) else b["name"] for b in parsed["fields"][0]["type"]]
    assert branches == [
        "null",
        "BooleanValue",
        "LongValue",
        "DoubleValue",
        "BytesValue",
        "StringValue",
        "ArrayValue",
        "MapValue",
    ]


@pytest.mark.parametrize(
    ("value", "branch_byte"),
    [(True, 0x02), (False, 0x02), (1, 0x04), (7, 0x04), (7.0, 0x06), (b"x", 0x08), ("x", 0x0A)],
)
def test_values_select_their_own_branch(value: Any, branch_byte: int) -> None:  # R2
    frame = avro.encode_frame(value)
    assert frame[10] == branch_byte
    assert_same(avro.decode_frame(frame), value)


@dataclasses.dataclass
class Point:
    x: int


class Color(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    SMALL = 1


class Name(enum.StrEnum):
    A = "a"


REJECTED: list[tuple[Any, str]] = [
    (2**63, "integer_overflow"),
    (-(2**63) - 1, "integer_overflow"),
    ([1, {"x": 10**30}], "integer_overflow"),
    (math.nan, "non_finite_float"),
    (math.inf, "non_finite_float"),
    (-math.inf, "non_finite_float"),
    ({"x": [float("nan")]}, "non_finite_float"),
    ({1: "a"}, "invalid_map_key"),
    ({b"k": "a"}, "invalid_map_key"),
    ({None: "a"}, "invalid_map_key"),
    ({("a",): 1}, "invalid_map_key"),
    ({Name.A: 1}, "invalid_map_key"),
    ((1, 2), "unsupported_value_type"),
    ({1, 2}, "unsupported_value_type"),
    (frozenset(), "unsupported_value_type"),
    (datetime.datetime(2024, 1, 1), "unsupported_value_type"),
    (datetime.date(2024, 1, 1), "unsupported_value_type"),
    (decimal.Decimal("1.5"), "unsupported_value_type"),
    (uuid.UUID(int=0), "unsupported_value_type"),
    (Point(1), "unsupported_value_type"),
    (Color.RED, "unsupported_value_type"),
    (Size.SMALL, "unsupported_value_type"),
    (Name.A, "unsupported_value_type"),
    (bytearray(b"x"), "unsupported_value_type"),
    (1j, "unsupported_value_type"),
    (object(), "unsupported_value_type"),
    (["ok", (1,)], "unsupported_value_type"),
    ("\ud800", "unsupported_value_type"),
    ({"\udfff": 1}, "unsupported_value_type"),
]


@pytest.mark.parametrize(("value", "reason"), REJECTED)
def test_encode_rejects_values_outside_the_policy(value: Any, reason: str) -> None:  # R3
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.encode_frame(value)
    assert reason_of(excinfo) == reason


def test_builtin_subclasses_encode_as_the_builtin() -> None:
    class Text(str):
        pass

    value = OrderedDict([("b", Text("x")), ("a", 1)])
    assert_same(avro.decode_frame(avro.encode_frame(value)), {"b": "x", "a": 1})
    assert avro.decode_frame(avro.encode_frame({Text("k"): 1})) == {"k": 1}


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_limit_on_encode() -> None:
    assert avro.decode_frame(avro.encode_frame(nested_list(avro.MAX_DEPTH))) == nested_list(
        avro.MAX_DEPTH
    )
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.encode_frame(nested_list(avro.MAX_DEPTH + 1))
    assert reason_of(excinfo) == "unsupported_value_type"
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.encode_frame(cycle)
    assert reason_of(excinfo) == "unsupported_value_type"


@pytest.mark.parametrize("depth", [avro.MAX_DEPTH + 1, 100_000])
def test_hostile_nesting_is_a_framing_error(depth: int) -> None:
    frame = avro.HEADER + b"\x0c\x02" * depth + b"\x00" * (depth + 1)
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_frame(frame)
    assert reason_of(excinfo) == "invalid_payload_framing"


@pytest.mark.parametrize(
    "datum",
    [
        b"\x03\x00",  # union index -2 (fastavro would wrap it round to ArrayValue)
        b"\x01\x00",  # union index -1
        b"\x04" + b"\x80" * 10 + b"\x02",  # varint longer than 10 bytes
        b"\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # varint beyond 64 bits
        b"\x02\x02",  # boolean byte other than 0/1
        b"\x0a\x01",  # negative string length
        b"\x0a\x0aabc",  # string length past the end
        b"\x0c\x01\x01\x00\x00",  # negative block count with negative byte size
        b"\x0e\x02\x02\xff\x00\x00",  # map key is not UTF-8
    ],
)
def test_decoder_is_strict(datum: bytes) -> None:
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_frame(avro.HEADER + datum)
    assert reason_of(excinfo) == "invalid_payload_framing"


def test_decoder_accepts_legal_non_minimal_encodings() -> None:
    # A negative block count is followed by the block's byte size (Avro spec).
    assert avro.decode_frame(avro.HEADER + b"\x0c\x03\x08\x04\x02\x04\x04\x00") == [1, 2]
    # A padded varint is still a valid long / union index.
    assert avro.decode_frame(avro.HEADER + b"\x8c\x00\x00") == []
    assert avro.decode_frame(bytearray(avro.HEADER + b"\x04\x0e")) == 7


@pytest.mark.parametrize(
    "blob", ["wwHioz3/VYAiNwA", "wwHioz3/VYAiNwA=\n", "wwHi oz3/VYAiNwA=", "é"]
)
def test_blob_base64_is_strict(blob: str) -> None:
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_blob(blob)
    assert reason_of(excinfo) == "invalid_payload_framing"


@pytest.mark.parametrize("bad", [None, b"wwHioz3/VYAiNwA=", 7])
def test_non_text_inputs_are_framing_errors(bad: Any) -> None:
    with pytest.raises(PayloadCodecError) as excinfo:
        avro.decode_blob(bad)
    assert reason_of(excinfo) == "invalid_payload_framing"
    with pytest.raises(PayloadCodecError):
        avro.decode_frame(bad if not isinstance(bad, bytes) else "text")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES)
def test_round_trip_preserves_value_and_types(value: Any) -> None:
    assert_same(avro.decode_blob(avro.encode_blob(value)), value)
    assert_same(avro.decode_frame(avro.encode_frame(value)), value)
