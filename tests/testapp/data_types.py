"""Typed workflows that carry every supported value type through every boundary.

``Bundle`` holds one value of each type; ``RoundTrip`` sends it through start
arguments, activity and local-activity arguments and results, a child's
arguments and result, a side effect, a signal handler, an update (arguments and
result), a query, memo, and continue-as-new, and returns what each receiver saw.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
import zoneinfo
from decimal import Decimal
from typing import Any, NamedTuple, TypedDict

import pydantic

import durable_workflow as dw
from durable_workflow import Activity, ModelRef, NonRetryableError, Workflow
from tests.testapp.models import Invocation


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Size(enum.StrEnum):
    SMALL = "s"
    LARGE = "l"


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


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    price: Decimal
    placed: dt.datetime


@dataclasses.dataclass(frozen=True)
class Bundle:
    """One value of every supported type (nested, frozen, with defaults)."""

    aware: dt.datetime
    offset: dt.datetime
    naive: dt.datetime
    day: dt.date
    clock: dt.time
    span: dt.timedelta
    amount: Decimal
    ident: uuid.UUID
    pair: tuple[int, str]
    tags: set[str]
    frozen: frozenset[int]
    raw: bytes
    buffer: bytearray
    color: Color
    level: Level
    size: Size
    lines: list[Line]
    point: Point
    shipment: Shipment
    invoice: Invoice
    by_size: dict[Size, int]
    big: int = 2**70
    note: str = "default"


PARIS = zoneinfo.ZoneInfo("Europe/Paris")


def sample() -> Bundle:
    placed = dt.datetime(2025, 10, 26, 2, 30, fold=1, tzinfo=PARIS)
    return Bundle(
        aware=dt.datetime(2025, 3, 30, 2, 30, tzinfo=PARIS),
        offset=dt.datetime(2025, 1, 1, 9, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
        naive=dt.datetime(2025, 1, 1, 9, 0, 0, 1),
        day=dt.date(2024, 2, 29),
        clock=dt.time(23, 59, 59, 999999),
        span=dt.timedelta(days=-1, seconds=5, microseconds=7),
        amount=Decimal("1.50"),
        ident=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        pair=(7, "seven"),
        tags={"b", "a", "c"},
        frozen=frozenset({3, 1, 2}),
        raw=b"\x00\xff",
        buffer=bytearray(b"buf"),
        color=Color.GREEN,
        level=Level.HIGH,
        size=Size.LARGE,
        lines=[Line("sku-1", Decimal("10.00"), placed), Line("sku-2", Decimal("1E+2"), placed)],
        point=Point(3),
        shipment={"on": dt.date(2025, 2, 1), "at": Point(1, 2.0)},
        invoice=Invoice(number=uuid.UUID(int=7), total=Decimal("9.90"), due=dt.date(2025, 3, 1)),
        by_size={Size.SMALL: 1, Size.LARGE: 2},
    )


@dataclasses.dataclass(frozen=True)
class Seen:
    """What each receiver got."""

    start: Bundle
    when: dt.datetime
    activity: Bundle
    local: Bundle
    child: Bundle
    side_effect: Bundle
    signal: Bundle | None
    update: Bundle | None
    generation: int


class EchoBundle(Activity):
    type_key = "tests.types.echo"

    def handle(self, bundle: Bundle, when: dt.datetime) -> Bundle:
        if not isinstance(bundle, Bundle) or not isinstance(when, dt.datetime):
            raise NonRetryableError(f"got {type(bundle)} and {type(when)}")
        return bundle


class ChildBundle(Workflow):
    type_key = "tests.types.child"

    def handle(self, bundle: Bundle) -> Bundle:
        return bundle


class RoundTrip(Workflow):
    type_key = "tests.types.round-trip"
    signals = ["go"]

    def __init__(self) -> None:
        self.signalled: Bundle | None = None
        self.updated: Bundle | None = None

    @dw.signal("bundle")
    def on_bundle(self, bundle: Bundle) -> None:
        self.signalled = bundle

    @dw.update("swap")
    def swap(self, bundle: Bundle) -> Bundle:
        self.updated = bundle
        return bundle

    @dw.query("latest")
    def latest(self, which: Color) -> Bundle | None:
        return self.signalled if which is Color.RED else self.updated

    def handle(self, bundle: Bundle, when: dt.datetime, generation: int = 1) -> Seen:
        activity = dw.activity(EchoBundle, bundle, when)
        local = dw.local_activity(EchoBundle, bundle, when)
        child = dw.child(ChildBundle, bundle)
        effect = dw.side_effect(lambda: bundle, result_type=Bundle)
        dw.upsert_memo({"when": when, "amount": bundle.amount, "point": bundle.point})
        dw.wait_signal("go")
        if generation == 1:
            dw.continue_as_new(bundle, when, 2)
        return Seen(
            bundle, when, activity, local, child, effect, self.signalled, self.updated, generation
        )


# ---------------------------------------------------------------- model instances
class TouchRow(Activity):
    """Receives the row itself: the activity re-fetches it when it runs."""

    type_key = "tests.types.touch-row"

    def handle(self, row: Invocation, ref: ModelRef[Invocation]) -> dict[str, Any]:
        fetched = ref.fetch()
        return {"name": row.name, "same": fetched.pk == row.pk, "type": type(row).__name__}


class DeleteRow(Activity):
    type_key = "tests.types.delete-row"

    def handle(self, ref: ModelRef[Invocation]) -> None:
        Invocation.objects.filter(pk=ref.pk).delete()


class RowWorkflow(Workflow):
    """A body gets the identifier only; activities get the row."""

    type_key = "tests.types.rows"

    def handle(self, row: ModelRef[Invocation], delete_first: bool = False) -> dict[str, Any]:
        seen = {"body_got": type(row).__name__, "label": row.label, "pk": row.pk}
        if delete_first:
            dw.activity(DeleteRow, row)
        try:
            seen["activity"] = dw.activity(TouchRow, row, row)
        except dw.ActivityFailed as failure:
            seen["failure"] = {
                "type": failure.exception_type,
                "is_model_error": isinstance(failure, dw.ModelInstanceNotFoundError),
                "message": failure.message,
            }
        return seen


class Refuses(Workflow):
    """Passes an activity a value the converter refuses, catches the error, goes on."""

    type_key = "tests.types.refuses"

    def handle(self) -> dict[str, Any]:
        from tests.testapp.workflows import Greet

        try:
            dw.activity(EchoBundle, sample(), {"items": [1, {"when": object()}]})
        except dw.PayloadCodecError as refused:
            path = refused.path
        return {"path": path, "steps_after": dw.activity(Greet, "Ada")}


class RowInBody(Workflow):
    """Declares the model itself on a body parameter: refused, bodies get a ModelRef."""

    type_key = "tests.types.row-in-body"

    def handle(self, row: Invocation) -> str:
        return row.name


class TypedOverHttp(Workflow):
    """Started over the webhooks with plain JSON; handle()'s annotations type it."""

    type_key = "tests.types.webhook"
    webhook = True

    def handle(self, day: dt.date, amount: Decimal, color: Color, line: Line) -> dict[str, Any]:
        values = {"day": day, "amount": amount, "color": color, "line": line}
        return {key: type(value).__name__ for key, value in values.items()}
