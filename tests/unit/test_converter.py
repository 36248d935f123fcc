"""The data converter: every supported type round-trips through both codecs, exactly."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
import zoneinfo
from decimal import Decimal
from typing import Any, NamedTuple, TypedDict

import pydantic
import pytest

from durable_workflow import PayloadCodecError, register_converter
from durable_workflow.codec import avro, json_codec
from durable_workflow.converter import from_plain, to_plain, unregister_converter

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Size(enum.StrEnum):
    S = "s"
    M = "m"


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    price: Decimal
    when: dt.datetime | None = None


@dataclasses.dataclass
class Order:
    lines: list[Line]
    tags: set[str]
    color: Color
    sizes: dict[Size, int] = dataclasses.field(default_factory=dict)
    note: str = "none"
    computed: int = dataclasses.field(default=0, init=False)


class Point(NamedTuple):
    x: int
    y: float = 0.5


class Shipment(TypedDict):
    on: dt.date
    at: Point


class Invoice(pydantic.BaseModel):
    number: uuid.UUID
    total: Decimal
    due: dt.date
    line: Line


def through(value: Any, hint: Any = None, codec: Any = avro) -> Any:
    plain = to_plain(value, binary=codec is avro)
    return from_plain(codec.decode_blob(codec.encode_blob(plain)), hint)


def same(a: Any, b: Any) -> bool:
    """Equal, of the same type, and for datetimes and decimals equal in every field."""
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, dt.datetime):
        return (a.tzinfo, a.fold, a.utcoffset(), a.timetuple()) == (
            b.tzinfo,
            b.fold,
            b.utcoffset(),
            b.timetuple(),
        )
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple()
    return True


SCALARS = [
    dt.datetime(2025, 3, 30, 2, 30, tzinfo=PARIS),  # inside the spring gap
    dt.datetime(2025, 10, 26, 2, 30, fold=1, tzinfo=PARIS),  # the second 02:30
    dt.datetime(2025, 1, 1, 9, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    dt.datetime(2025, 1, 1, 9, tzinfo=dt.UTC),
    dt.datetime(2025, 1, 1, 9, 0, 0, 123456),
    dt.date(2024, 2, 29),
    dt.time(23, 59, 59, 999999),
    dt.time(8, 0, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
    dt.timedelta(days=-1, seconds=5, microseconds=7),
    Decimal("1.50"),
    Decimal("-0"),
    Decimal("1E+3"),
    Decimal("123456789012345678901234567890.000000001"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    (1, "a", (2.0, None)),
    {3, 1, 2},
    frozenset({"x", "y"}),
    b"\x00\xff",
    bytearray(b"ab"),
    2**80,
    -(2**70),
    {1: "a", 2: "b"},
    {"$dw": "datetime", "value": "a plain dict that looks like a tag"},
    {(1, 2): "tuple key", None: "none key"},
]


@pytest.mark.parametrize("codec", [avro, json_codec], ids=["avro", "json"])
@pytest.mark.parametrize(
    "value", SCALARS, ids=[f"{i}-{type(v).__name__}" for i, v in enumerate(SCALARS)]
)
def test_standard_types_round_trip_without_a_declared_type(value, codec):
    assert same(through(value, codec=codec), value)


@pytest.mark.parametrize("value", [Color.BLUE, Level.HIGH, Size.M])
def test_enum_members_need_their_class_declared(value):
    assert same(through(value, type(value)), value)
    assert through(value) == value.value  # without a declared class: the value


def test_enum_keys_with_their_class_declared():
    assert through({Color.RED: 1, Color.BLUE: 2}, dict[Color, int]) == {Color.RED: 1, Color.BLUE: 2}


def test_nested_dataclasses_with_defaults_and_frozen_members():
    order = Order([Line("a", Decimal("2.10"), SCALARS[0])], {"x"}, Color.RED, {Size.S: 2})
    order.computed = 7
    back = through(order, Order)
    assert back == order and back.computed == 7
    assert same(back.lines[0].when, SCALARS[0]) and same(back.lines[0].price, Decimal("2.10"))
    assert through(order)["lines"][0]["sku"] == "a"  # undeclared: a dict of the fields


def test_a_record_gains_a_defaulted_field_while_old_payloads_decode():
    old_payload = {"lines": [], "tags": [], "color": "red"}  # before "note" existed
    assert from_plain(old_payload, Order) == Order([], set(), Color.RED)


def test_named_tuples_typed_dicts_and_pydantic_models():
    assert same(through(Point(1), Point), Point(1, 0.5))
    shipment: Shipment = {"on": dt.date(2025, 1, 2), "at": Point(3, 4.0)}
    assert through(shipment, Shipment) == shipment
    invoice = Invoice(
        number=uuid.uuid4(),
        total=Decimal("9.90"),
        due=dt.date(2025, 2, 1),
        line=Line("b", Decimal("1")),
    )
    assert through(invoice, Invoice) == invoice
    assert through([invoice], list[Invoice]) == [invoice]
    assert through(invoice, Invoice | None) == invoice


def test_declared_types_read_plain_json_values():
    assert from_plain("2025-01-01T00:00:00Z", dt.datetime) == dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    assert from_plain({"x": 2}, Point) == Point(2)
    assert from_plain(["1.5", "2"], list[Decimal]) == [Decimal("1.5"), Decimal("2")]
    assert from_plain([1, 2], tuple[int, ...]) == (1, 2)
    assert from_plain("red", Color) is Color.RED
    assert from_plain(None, Order | None) is None


def test_declared_builtins_never_reject_what_was_stored():
    assert from_plain({"a": 1}, list) == {"a": 1}  # a loose annotation stays harmless
    assert from_plain(1, float) == 1 and type(from_plain(1, float)) is int


@pytest.mark.parametrize(
    ("value", "path", "type_name"),
    [
        ([1, {"items": [0, 1, 2, {"when": object()}]}], 'value[1] → "items"[3] → "when"', "object"),
        ({"f": float("nan")}, 'value → "f"', "float"),
        ({"s": "\ud800"}, 'value → "s"', "str"),
        ([lambda: 1], "value[0]", "function"),
        ([iter([1])], "value[0]", "list_iterator"),
        (dt.datetime(2025, 1, 1, tzinfo=dt.tzinfo()), "value", "datetime.datetime"),
    ],
)
def test_unsupported_values_are_refused_where_they_are(value, path, type_name):
    with pytest.raises(PayloadCodecError) as info:
        to_plain(value)
    assert info.value.reason == "unsupported_value_type"
    assert info.value.path == path
    assert info.value.value_type == type_name
    assert "; " in str(info.value)  # what to do instead


def test_paths_name_arguments_and_fields():
    @dataclasses.dataclass
    class Holder:
        items: list[Any]

    with pytest.raises(PayloadCodecError, match=r'argument 2 → items\[3\] → "when": object'):
        to_plain(Holder([0, 1, 2, {"when": object()}]), "argument 2")


def test_a_family_converter_via_a_base_class():
    class Money:
        def __init__(self, cents: int, currency: str) -> None:
            self.cents, self.currency = cents, currency

        def __eq__(self, other: object) -> bool:
            return type(other) is type(self) and vars(other) == vars(self)

    class Euro(Money):
        pass

    register_converter(
        Money,
        name="test.money",
        encode=lambda m: {"cents": m.cents, "currency": m.currency},
        decode=lambda data, cls: cls(data["cents"], data["currency"]),
        subclasses=True,
    )
    try:
        assert through(Euro(150, "EUR"), Euro) == Euro(150, "EUR")
        assert through(Money(1, "USD")) == Money(1, "USD")  # undeclared: the registered class
        with pytest.raises(PayloadCodecError, match="does not fit the declared Line"):
            through(Money(1, "USD"), Line)
    finally:
        unregister_converter(Money)
    with pytest.raises(PayloadCodecError, match=r"no converter named 'test\.money'"):
        from_plain({"$dw": "custom", "name": "test.money", "value": {}})


def test_plain_values_pass_uncopied():
    value = {"a": [1, "x", {"b": None}], "c": b"\x00"}
    assert to_plain(value) is value
    assert from_plain(value) is value
