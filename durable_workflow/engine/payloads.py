"""The one place the engine turns body values into stored envelopes and back.

Every part encodes and decodes through the run's ``Payloads``: values go through
the data converter (``durable_workflow.converter``), then the run's codec.
Decoding takes the declared type of the receiver (a ``handle()`` parameter, a
callee's return annotation) so records, enums and the like come back as their
classes; a workflow body never receives a model row, only its ``ModelRef``.
"""

from __future__ import annotations

from typing import Any

from durable_workflow.codec import envelope
from durable_workflow.converter import WORKFLOW, Signature, arguments_from_plain, payloads
from durable_workflow.converter.hints import Hint


class Payloads:
    """Encodes and decodes the values of one run with the run's codec."""

    __slots__ = ("codec",)

    def __init__(self, codec: str) -> None:
        self.codec = codec

    def encode(self, value: Any, root: str = "value") -> dict[str, Any]:
        """A value the body produced; a refused value names ``root`` and its path."""
        return payloads.encode_value(value, self.codec, root)

    def encode_arguments(self, values: list[Any]) -> dict[str, Any]:
        return payloads.encode_arguments(values, self.codec)

    def decode(self, env: Any, hint: Hint = None, root: str = "value") -> Any:
        return payloads.decode_value(env, hint, codec=self.codec, root=root, receiver=WORKFLOW)

    def decode_result(self, env: Any, hint: Hint = None) -> Any:
        """A callee's result, as its declared type (``Operation.settle``'s decoder)."""
        return self.decode(env, hint, "result")

    def decode_plain(self, env: Any) -> Any:
        """The stored value as the codec gives it, before any declared type applies."""
        return envelope.decode(env, expected_codec=self.codec)

    def decode_arguments(self, env: Any, signature: Signature) -> list[Any]:
        return payloads.decode_arguments(env, signature, codec=self.codec, receiver=WORKFLOW)

    @staticmethod
    def typed_arguments(plain: Any, signature: Signature) -> list[Any]:
        """Plain arguments (from ``decode_plain``) as ``signature``'s parameters declare."""
        return arguments_from_plain(plain, signature, receiver=WORKFLOW)
