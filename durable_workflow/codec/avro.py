"""Avro Value protocol v1 (schema ``durable_workflow.protocol.Value``).

Frame = magic ``C3 01`` + 8-byte CRC-64-AVRO schema fingerprint + Avro binary datum;
blob = base64 of the frame.  fastavro parses the schema, and the tests check our bytes
against fastavro's writer and reader, but the datum itself is written and read here:
that is several times faster than fastavro's generic record path for this recursive
schema, and stricter on input (fastavro wraps negative union indexes, accepts varints
past 64 bits, and overflows the C stack on deeply nested frames).
"""

from __future__ import annotations

import base64
import binascii
import json
from enum import Enum
from struct import Struct
from typing import Any, Final

from fastavro import parse_schema

from durable_workflow.exceptions import PayloadCodecError

SCHEMA_JSON: Final = (
    '{"type":"record","name":"Value","namespace":"durable_workflow.protocol","fields":[{"name":'
    '"value","type":["null",{"type":"record","name":"BooleanValue","fields":[{"name":"boolean",'
    '"type":"boolean"}]},{"type":"record","name":"LongValue","fields":[{"name":"long","type":'
    '"long"}]},{"type":"record","name":"DoubleValue","fields":[{"name":"double","type":"double"'
    '}]},{"type":"record","name":"BytesValue","fields":[{"name":"bytes","type":"bytes"}]},{"type"'
    ':"record","name":"StringValue","fields":[{"name":"string","type":"string"}]},{"type":"record'
    '","name":"ArrayValue","fields":[{"name":"items","type":{"type":"array","items":"Value"}}]},{'
    '"type":"record","name":"MapValue","fields":[{"name":"entries","type":{"type":"map","values":'
    '"Value"}}]}]}]}'
)
PARSED_SCHEMA: Final[Any] = parse_schema(json.loads(SCHEMA_JSON))
MAGIC: Final = b"\xc3\x01"
FINGERPRINT: Final = bytes.fromhex("e2a33dff55802237")  # already in wire (little-endian) order
HEADER: Final = MAGIC + FINGERPRINT
SUPPORTED_FINGERPRINTS: Final = frozenset({FINGERPRINT})

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
# Deepest container nesting accepted in either direction (same limit as serde_json).
MAX_DEPTH: Final = 128

# Union branch index of each kind, already zigzag-encoded as a single byte.
_NULL, _BOOL, _LONG, _DOUBLE, _BYTES, _STRING, _ARRAY, _MAP = range(0, 16, 2)
_pack_double = Struct("<d").pack
_unpack_double = Struct("<d").unpack_from
_ONE_BYTE: Final = [bytes((i,)) for i in range(128)]
_BUILTINS: Final[tuple[type[Any], ...]] = (str, int, float, bytes, dict, list)


def _fail(reason: str, message: str) -> PayloadCodecError:
    return PayloadCodecError(reason, message)


def _varint(n: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer."""
    n = (n << 1) ^ (n >> 63)
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _write(value: Any, out: bytearray, depth: int) -> None:
    cls = value.__class__
    if cls is str:
        data = value.encode()
        out.append(_STRING)
        out += _varint(len(data))
        out += data
    elif cls is int:
        if value < INT64_MIN or value > INT64_MAX:
            raise _fail("integer_overflow", f"{value} does not fit a signed 64-bit long")
        out.append(_LONG)
        out += _varint(value)
    elif cls is bool:
        out += b"\x02\x01" if value else b"\x02\x00"
    elif cls is dict or cls is list:
        if depth >= MAX_DEPTH:
            raise _fail("unsupported_value_type", f"nesting deeper than {MAX_DEPTH} (or a cycle)")
        out.append(_MAP if cls is dict else _ARRAY)
        if value and cls is list:
            out += _varint(len(value))
            for item in value:
                _write(item, out, depth + 1)
        elif value:
            out += _varint(len(value))
            for key, item in value.items():
                if key.__class__ is not str:
                    if not isinstance(key, str) or isinstance(key, Enum):
                        raise _fail("invalid_map_key", f"map key {key!r} is not a str")
                    key = str.__str__(key)
                data = key.encode()
                out += _varint(len(data))
                out += data
                _write(item, out, depth + 1)
        out.append(0)
    elif cls is float:
        if value - value != 0.0:  # only NaN and the infinities fail this
            raise _fail("non_finite_float", f"{value!r} is not a finite double")
        out.append(_DOUBLE)
        out += _pack_double(value)
    elif value is None:
        out.append(_NULL)
    elif cls is bytes:
        out.append(_BYTES)
        out += _varint(len(value))
        out += value
    else:
        _write(_plain(value), out, depth)


def _plain(value: Any) -> Any:
    """Subclasses of the builtins pass as the builtin; enums and all else need an adapter."""
    for base in _BUILTINS:
        if isinstance(value, base) and not isinstance(value, Enum):
            return base(value)
    raise _fail("unsupported_value_type", f"{type(value).__qualname__} has no Avro value branch")


def encode_frame(value: Any) -> bytes:
    """Encode ``value`` as one v1 single-object frame (header plus datum)."""
    out = bytearray(HEADER)
    try:
        _write(value, out, 0)
    except UnicodeEncodeError as exc:  # lone surrogates have no UTF-8 form
        raise _fail("unsupported_value_type", f"text is not valid UTF-8: {exc}") from None
    return bytes(out)


def encode_blob(value: Any) -> str:
    """Encode ``value`` as the base64 text of its frame."""
    return base64.b64encode(encode_frame(value)).decode("ascii")


def _read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return (value, next position)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise _fail("invalid_payload_framing", "varint longer than 10 bytes")
        pos += 1
        b = buf[pos]
        n |= (b & 0x7F) << shift
        shift += 7
    if n >> 64:
        raise _fail("invalid_payload_framing", "varint exceeds 64 bits")
    return (n >> 1) ^ -(n & 1), pos + 1


def _read_size(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a byte/string length, which must be non-negative and in bounds."""
    n, pos = _read_long(buf, pos)
    if n < 0 or pos + n > len(buf):
        raise _fail("invalid_payload_framing", f"length {n} does not fit the frame")
    return n, pos


def _read_text(buf: bytes, pos: int) -> tuple[str, int]:
    """Read a UTF-8 string (value or map key), with the one-byte length inlined."""
    n = buf[pos]
    if n < 0x80 and not n & 1:
        pos += 1
        end = pos + (n >> 1)
        if end > len(buf):
            raise _fail("invalid_payload_framing", "string runs past the end of the frame")
    else:
        n, pos = _read_size(buf, pos)
        end = pos + n
    return buf[pos:end].decode(), end


def _read_count(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an array/map block count; a negative count carries a byte size we skip."""
    n, pos = _read_long(buf, pos)
    if n < 0:
        size, pos = _read_long(buf, pos)
        if size < 0:
            raise _fail("invalid_payload_framing", "negative block size")
        n = -n
    return n, pos


def _read(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    tag = buf[pos]
    pos += 1
    if tag > _MAP or tag & 1:  # a negative or out-of-range index, or a padded varint
        index, pos = _read_long(buf, pos - 1)
        if index < 0 or index > 7:
            raise _fail("invalid_payload_framing", f"unknown union branch {index}")
        tag = index * 2
    if tag == _STRING:
        return _read_text(buf, pos)
    if tag == _LONG:
        b = buf[pos]
        return ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_long(buf, pos)
    if tag >= _ARRAY:
        if depth >= MAX_DEPTH:
            raise _fail("invalid_payload_framing", f"nesting deeper than {MAX_DEPTH}")
        is_map = tag == _MAP
        container: Any = {} if is_map else []
        count, pos = _read_count(buf, pos)
        while count:
            for _ in range(count):
                if is_map:
                    key, pos = _read_text(buf, pos)
                    container[key], pos = _read(buf, pos, depth + 1)
                else:
                    item, pos = _read(buf, pos, depth + 1)
                    container.append(item)
            count, pos = _read_count(buf, pos)
        return container, pos
    if tag == _BOOL:
        b = buf[pos]
        if b > 1:
            raise _fail("invalid_payload_framing", f"boolean byte {b:#04x}")
        return b == 1, pos + 1
    if tag == _DOUBLE:
        (number,) = _unpack_double(buf, pos)
        if number - number != 0.0:
            raise _fail("invalid_payload_framing", "non-finite double")
        return number, pos + 8
    if tag == _BYTES:
        n, pos = _read_size(buf, pos)
        return buf[pos : pos + n], pos + n
    return None, pos  # _NULL


def decode_frame(frame: bytes | bytearray | memoryview) -> Any:
    """Decode one single-object frame back into a plain Python value."""
    if isinstance(frame, (bytearray, memoryview)):
        frame = bytes(frame)
    elif not isinstance(frame, bytes):
        raise _fail("invalid_payload_framing", f"frame is {type(frame).__name__}, not bytes")
    if len(frame) < 10 or frame[:2] != MAGIC:
        raise _fail("invalid_payload_framing", "missing single-object header")
    if frame[2:10] not in SUPPORTED_FINGERPRINTS:
        raise _fail("unsupported_payload_schema", f"unknown schema fingerprint {frame[2:10].hex()}")
    try:
        value, pos = _read(frame, 10, 0)
    except PayloadCodecError:
        raise
    except Exception as exc:  # any reader failure (IndexError, struct.error, ...) is bad framing
        raise _fail("invalid_payload_framing", f"{type(exc).__name__}: {exc}") from None
    if pos != len(frame):
        raise _fail("invalid_payload_framing", f"{len(frame) - pos} trailing byte(s)")
    return value


def decode_blob(blob: str) -> Any:
    """Decode the base64 text of a frame (strict alphabet and padding)."""
    if not isinstance(blob, str):
        raise _fail("invalid_payload_framing", f"blob is {type(blob).__name__}, not str")
    try:
        frame = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _fail("invalid_payload_framing", f"bad base64: {exc}") from None
    return decode_frame(frame)
