"""Workflows whose golden histories were recorded before the data converter existed.

Their payloads hold only the plain values the codec always carried (maps, lists,
bytes, text that looks like dates, numbers at the edges, keys that look special),
through every boundary: start and activity arguments, activity and local-activity
results, side effects, signals, updates, children and continue-as-new. The replay
tests check that today's code decodes each of them exactly as the old code did.
Do not change these classes: the recorded histories must keep replaying.
"""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow

#: Plain values that sit close to what a tagged shape could be confused with.
PLAIN: dict[str, Any] = {
    "text": "2025-03-30T02:30:00+01:00",
    "uuid_text": "12345678-1234-5678-1234-567812345678",
    "decimal_text": "1.50",
    "bytes": b"\x00\xff",
    "ints": [0, -1, 2**63 - 1, -(2**63)],
    "floats": [1.0, -0.5, 1e300],
    "flags": [True, False, None],
    "empty": {"map": {}, "list": []},
    "numeric_keys": {"0": "zero", "10": "ten"},
    "dollar_keys": {"$type": "datetime", "$ref": "#/a", "value": "x"},
    "pairs": [["a", 1], ["b", 2]],
    "unicode": "żółw 🐢",
}


class Echo(Activity):
    type_key = "tests.data-echo"

    def handle(self, value: Any, label: str) -> dict[str, Any]:
        return {"label": label, "value": value}


class EchoText(Activity):
    type_key = "tests.data-echo-text"

    def handle(self, text: str, raw: bytes) -> list[Any]:
        return [text, raw, len(raw)]


class PlainValues(Workflow):
    """Start arguments, activity and local-activity round trips, a side effect."""

    type_key = "tests.data-plain"

    def handle(self, payload: dict[str, Any], items: list[Any]) -> dict[str, Any]:
        echoed = dw.activity(Echo, payload, "queued")
        local = dw.local_activity(EchoText, payload["text"], payload["bytes"])
        effect = dw.side_effect(lambda: {"numeric_keys": {"1": 1}, "nested": [[{}]]})
        return {"echoed": echoed, "local": local, "effect": effect, "items": items}


class PlainMessages(Workflow):
    """Signal and update arguments and an update result."""

    type_key = "tests.data-messages"
    signals = ["values"]

    def __init__(self) -> None:
        self.received: list[Any] = []

    @dw.update("collect")
    def collect(self, value: Any) -> dict[str, Any]:
        self.received.append(value)
        return {"count": len(self.received), "last": value}

    def handle(self) -> dict[str, Any]:
        signalled = dw.wait_signal("values")
        dw.wait(lambda: len(self.received) >= 2)
        return {"signalled": signalled, "received": self.received}


class PlainChild(Workflow):
    type_key = "tests.data-child"

    def handle(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"child_saw": value}


class PlainChain(Workflow):
    """A child's arguments and result, then continue-as-new with plain values."""

    type_key = "tests.data-chain"

    def handle(self, value: dict[str, Any], generation: int = 1) -> dict[str, Any]:
        if generation == 1:
            result = dw.child(PlainChild, value)
            dw.continue_as_new({"from_child": result, "bytes": b"\x01"}, 2)
        return {"generation": generation, "value": value}
