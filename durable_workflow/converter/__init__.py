"""The data converter: Python values to and from the payload codec's plain values.

It sits above the codec, which is unchanged: the stored format stays the Avro
Value protocol (or JSON), and payloads written before the converter existed
decode exactly as they did. See docs/how-to/passing-data.md for the shapes.
"""

from durable_workflow.converter.custom import register_converter, unregister_converter
from durable_workflow.converter.decode import (
    ACTIVITY,
    CLIENT,
    WORKFLOW,
    arguments_from_plain,
    from_plain,
)
from durable_workflow.converter.encode import arguments_to_plain, to_plain
from durable_workflow.converter.hints import Signature, handle_signature, signature_of
from durable_workflow.converter.models import ModelRef

__all__ = [
    "ACTIVITY",
    "CLIENT",
    "WORKFLOW",
    "ModelRef",
    "Signature",
    "arguments_from_plain",
    "arguments_to_plain",
    "from_plain",
    "handle_signature",
    "register_converter",
    "signature_of",
    "to_plain",
    "unregister_converter",
]
