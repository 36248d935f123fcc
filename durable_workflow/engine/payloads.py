"""The one place the engine turns body values into stored envelopes and back.

Every part encodes and decodes through the run's ``Payloads``, so how values
are converted (the codec today) is decided here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from durable_workflow.codec import envelope


class Payloads:
    """Encodes and decodes the values of one run with the run's codec."""

    __slots__ = ("codec",)

    def __init__(self, codec: str) -> None:
        self.codec = codec

    def encode(self, value: Any) -> dict[str, Any]:
        return envelope.encode(value, self.codec)

    def decode(self, env: Any) -> Any:
        return envelope.decode(env, expected_codec=self.codec)
