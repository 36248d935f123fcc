"""Tagged shapes of the standard library's scalar types (see docs/how-to/passing-data.md).

Each type has a stable map shape ``{"$dw": <tag>, ...}`` and both directions
here. Decoding builds only the fixed types named in this module; a zone name
is validated before ``zoneinfo`` looks it up.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import uuid
import zoneinfo
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final

TAG: Final = "$dw"

_ZONE_KEY = re.compile(r"[A-Za-z0-9_+\-]{1,64}(?:/[A-Za-z0-9_+\-]{1,64}){0,3}")


class Refused(Exception):
    """A value (or stored shape) that cannot be converted, with advice for the caller."""

    def __init__(self, problem: str, advice: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.advice = advice


# ----------------------------------------------------------------- encoding
def _zone_fields(tz: dt.tzinfo | None, what: str) -> dict[str, Any]:
    if tz is None or isinstance(tz, dt.timezone):
        return {}  # naive, or a fixed offset that the ISO text carries
    if isinstance(tz, zoneinfo.ZoneInfo) and tz.key:
        return {"zone": tz.key}
    raise Refused(
        f"a {what} in the zone {tz!r} ({type(tz).__qualname__}) cannot keep its zone",
        "use zoneinfo.ZoneInfo('Area/City') or a datetime.timezone offset",
    )


def encode_datetime(value: dt.datetime) -> dict[str, Any]:
    zone = _zone_fields(value.tzinfo, "datetime")
    out: dict[str, Any] = {TAG: "datetime", "value": value.isoformat(), **zone}
    if value.fold:
        out["fold"] = 1
    return out


def encode_time(value: dt.time) -> dict[str, Any]:
    if value.tzinfo is not None and not isinstance(value.tzinfo, dt.timezone):
        raise Refused(
            f"a time of day in the zone {value.tzinfo!r} has no fixed offset",
            "pass a datetime (the zone needs a date) or a time with a datetime.timezone",
        )
    out: dict[str, Any] = {TAG: "time", "value": value.isoformat()}
    if value.fold:
        out["fold"] = 1
    return out


def encode_date(value: dt.date) -> dict[str, Any]:
    return {TAG: "date", "value": value.isoformat()}


def encode_timedelta(value: dt.timedelta) -> dict[str, Any]:
    return {
        TAG: "timedelta",
        "days": value.days,
        "seconds": value.seconds,
        "microseconds": value.microseconds,
    }


def encode_decimal(value: Decimal) -> dict[str, Any]:
    return {TAG: "decimal", "value": str(value)}  # str() keeps sign, digits and exponent


def encode_uuid(value: uuid.UUID) -> dict[str, Any]:
    return {TAG: "uuid", "value": str(value)}


def encode_big_int(value: int) -> dict[str, Any]:
    return {TAG: "int", "value": str(value)}


def encode_bytes_as_text(value: bytes) -> dict[str, Any]:
    return {TAG: "bytes", "base64": base64.b64encode(value).decode("ascii")}


ENCODERS: Final[dict[type, Callable[[Any], dict[str, Any]]]] = {
    dt.datetime: encode_datetime,
    dt.date: encode_date,
    dt.time: encode_time,
    dt.timedelta: encode_timedelta,
    Decimal: encode_decimal,
    uuid.UUID: encode_uuid,
}


# ----------------------------------------------------------------- decoding
def _text(shape: dict[str, Any], key: str = "value") -> str:
    value = shape.get(key)
    if not isinstance(value, str):
        raise Refused(f"the stored {shape[TAG]} has no text {key!r}")
    return value


def _fold(shape: dict[str, Any]) -> int:
    fold = shape.get("fold", 0)
    if fold not in (0, 1) or isinstance(fold, bool):
        raise Refused(f"the stored {shape[TAG]} has fold {fold!r}")
    return int(fold)


def _zone(name: Any) -> zoneinfo.ZoneInfo:
    if not isinstance(name, str) or not _ZONE_KEY.fullmatch(name) or ".." in name:
        raise Refused(f"{name!r} is not a time zone name")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise Refused(f"unknown time zone {name!r}", "install tzdata on this host") from None


def _iso(parse: Callable[[str], Any], shape: dict[str, Any]) -> Any:
    text = _text(shape)
    try:
        return parse(text)
    except ValueError:
        raise Refused(f"{text!r} is not an ISO {shape[TAG]}") from None


def decode_datetime(shape: dict[str, Any]) -> dt.datetime:
    value: dt.datetime = _iso(dt.datetime.fromisoformat, shape)
    if "zone" in shape:
        if value.tzinfo is None:
            raise Refused("a stored datetime names a zone but has no offset")
        value = value.replace(tzinfo=_zone(shape["zone"]))
    return value.replace(fold=_fold(shape))


def decode_date(shape: dict[str, Any]) -> dt.date:
    value: dt.date = _iso(dt.date.fromisoformat, shape)
    return value


def decode_time(shape: dict[str, Any]) -> dt.time:
    value: dt.time = _iso(dt.time.fromisoformat, shape)
    return value.replace(fold=_fold(shape))


def decode_timedelta(shape: dict[str, Any]) -> dt.timedelta:
    days, seconds, micros = (shape.get(key) for key in ("days", "seconds", "microseconds"))
    if not (type(days) is int and type(seconds) is int and type(micros) is int):
        raise Refused("a stored timedelta needs whole days, seconds and microseconds")
    try:
        return dt.timedelta(days=days, seconds=seconds, microseconds=micros)
    except OverflowError:
        raise Refused("the stored timedelta is out of range") from None


def decode_decimal(shape: dict[str, Any]) -> Decimal:
    text = _text(shape)
    try:
        return Decimal(text)
    except InvalidOperation:
        raise Refused(f"{text[:40]!r} is not a decimal number") from None


def decode_uuid(shape: dict[str, Any]) -> uuid.UUID:
    text = _text(shape)
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Refused(f"{text[:40]!r} is not a UUID") from None


def decode_big_int(shape: dict[str, Any]) -> int:
    text = _text(shape)
    try:
        return int(text, 10)
    except ValueError:  # also Python's limit on very long digit strings
        raise Refused(f"{text[:40]!r} is not a whole number") from None


def decode_bytes(shape: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(_text(shape, "base64"), validate=True)
    except (binascii.Error, ValueError):
        raise Refused("the stored bytes are not base64") from None


DECODERS: Final[dict[str, Callable[[dict[str, Any]], Any]]] = {
    "datetime": decode_datetime,
    "date": decode_date,
    "time": decode_time,
    "timedelta": decode_timedelta,
    "decimal": decode_decimal,
    "uuid": decode_uuid,
    "int": decode_big_int,
    "bytes": decode_bytes,
}


# ------------------------------------------------- plain values, leniently
def from_text(cls: type, value: Any) -> Any:
    """A declared scalar type read from its plain form (a webhook's JSON, an old payload)."""
    if isinstance(value, cls) and not (cls is dt.date and isinstance(value, dt.datetime)):
        return value
    if isinstance(value, str):
        if cls in (dt.datetime, dt.date, dt.time):
            shape = {TAG: cls.__name__, "value": value}
            return DECODERS[cls.__name__](shape)
        if cls is uuid.UUID:
            return decode_uuid({TAG: "uuid", "value": value})
        if cls is Decimal:
            return decode_decimal({TAG: "decimal", "value": value})
    if cls is Decimal and type(value) is int:
        return Decimal(value)
    if cls is dt.timedelta and type(value) in (int, float):
        return dt.timedelta(seconds=value)
    raise Refused(f"a {type(value).__qualname__} cannot be read as {cls.__qualname__}")
