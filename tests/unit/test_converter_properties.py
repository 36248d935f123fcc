"""Generated values: supported ones round-trip, unsupported ones are refused where they are,
and no stored payload makes the decoder import or build anything but the declared type."""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
import pickle
import sys
import uuid
import zoneinfo
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_workflow import PayloadCodecError
from durable_workflow.codec import avro, json_codec
from durable_workflow.converter import from_plain, to_plain
from durable_workflow.converter.paths import render

ZONES = [zoneinfo.ZoneInfo(name) for name in ("Europe/Paris", "America/New_York", "UTC")]

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
datetimes = st.one_of(
    st.datetimes(),
    st.datetimes(timezones=st.sampled_from(ZONES)),
    st.datetimes(timezones=st.timezones()).filter(
        lambda d: isinstance(d.tzinfo, dt.timezone | zoneinfo.ZoneInfo)
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
    st.binary(max_size=8),
    datetimes,
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.uuids(),
)
hashables = st.one_of(st.integers(), texts, st.uuids(), st.dates())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(hashables, max_size=4),
        st.sets(hashables, max_size=4),
        st.dictionaries(texts, inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=3),
        st.builds(bytearray, st.binary(max_size=4)),
    ),
    max_leaves=12,
)


def identical(a: Any, b: Any) -> bool:
    """Equal in value and type all the way down (zones, folds and exponents too)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dt.datetime):
        return a == b and (a.tzinfo, a.fold, a.replace(tzinfo=None)) == (
            b.tzinfo,
            b.fold,
            b.replace(tzinfo=None),
        )
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple()
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(values)
def test_generated_values_round_trip_through_avro(value):
    plain = to_plain(value)
    assert identical(from_plain(avro.decode_blob(avro.encode_blob(plain))), value)


@settings(max_examples=150, deadline=None)
@given(values)
def test_generated_values_round_trip_through_json(value):
    plain = to_plain(value, binary=False)
    assert identical(from_plain(json_codec.decode_blob(json_codec.encode_blob(plain))), value)


class Opaque:
    """Not a value the converter knows."""


@st.composite
def buried(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    """An Opaque somewhere inside a generated value, and the path to it."""
    path: list[Any] = []
    value: Any = Opaque()
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["list", "dict", "field"]))
        if kind == "list":
            before = draw(st.lists(st.integers(), max_size=3))
            value, step = [*before, value], len(before)
        elif kind == "dict":
            key = draw(st.text(min_size=1, max_size=5).filter(lambda k: k != "$dw"))
            value, step = {key: value}, key
        else:
            value, step = Box(value), "content"
        path.insert(0, step)
    return value, path


@dataclasses.dataclass
class Box:
    content: Any


def expected_path(steps: list[Any]) -> str:
    from durable_workflow.converter.paths import Attr

    node = None
    for step in steps:
        node = (node, Attr(step) if step == "content" else step)
    return render("argument 1", node)


@settings(max_examples=200, deadline=None)
@given(buried())
def test_unsupported_values_are_refused_with_their_path(case):
    value, steps = case
    with pytest.raises(PayloadCodecError) as info:
        to_plain(value, "argument 1")
    assert info.value.path == expected_path(steps)
    assert info.value.value_type.endswith("Opaque")


# ---------------------------------------------------------------- hostile payloads
HOSTILE = [
    {"$dw": "dataclass", "fields": {"cls": "os.system", "args": ["echo hi"]}},
    {"$dw": "dataclass", "class": "subprocess.Popen", "fields": {}},
    {"$dw": "custom", "name": "builtins.eval", "value": "__import__('os')"},
    {"$dw": "pydantic", "fields": {"__class__": "os.system"}},
    {"$dw": "enum", "value": "os.system"},
    {"$dw": "model", "app_label": "auth", "model": "user", "pk": 1, "db": "default"},
    {"$dw": "datetime", "value": "2025-01-01T00:00:00+00:00", "zone": "../../../../etc/passwd"},
    {"$dw": "datetime", "value": "2025-01-01T00:00:00+00:00", "zone": "/etc/localtime"},
    {"$dw": "int", "value": "9" * 100_000},
    {"$dw": "decimal", "value": "__import__('os')"},
    {"$dw": "pickle", "value": pickle.dumps(Opaque())},
    {"$dw": "dict", "items": [[{"$dw": "set", "items": [[]]}, 1]]},
]


@dataclasses.dataclass
class Declared:
    name: str = ""


@pytest.mark.parametrize("payload", HOSTILE, ids=lambda p: p["$dw"])
@pytest.mark.parametrize("hint", [None, Declared, dict[str, Any], dt.datetime])
def test_a_hostile_payload_imports_nothing_and_builds_only_the_declared_type(payload, hint):
    """Nothing new is imported (only modules already loaded are looked up), no pickle
    is read, and every object in the result is a plain value, the declared class, or
    one of the fixed standard types the tags name."""
    imported: list[str] = []
    real_import = builtins.__import__

    def watch(name: str, *args: Any, **kwargs: Any) -> Any:
        if name not in sys.modules:
            imported.append(name)
        return real_import(name, *args, **kwargs)

    builtins.__import__ = watch
    real_loads, pickle.loads = pickle.loads, _no_pickle
    try:
        decoded = from_plain(payload, hint)
    except PayloadCodecError:
        decoded = None  # refused, saying where: fine
    finally:
        builtins.__import__ = real_import
        pickle.loads = real_loads
    assert imported == []
    allowed = (dict, list, str, int, bytes, Declared, dt.datetime, uuid.UUID, Decimal, type(None))
    for item in _walk(decoded):
        assert isinstance(item, allowed) or type(item).__name__ == "ModelRef", item


def _no_pickle(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the decoder read a pickle")


def _walk(value: Any) -> list[Any]:
    out = [value]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _walk(key) + _walk(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            out += _walk(item)
    return out
