"""Payload codecs: the Avro Value protocol (default), compact JSON, and the stored envelope."""

from durable_workflow.codec.avro import decode_blob, decode_frame, encode_blob, encode_frame
from durable_workflow.codec.envelope import decode, encode, encoded_size, to_inspection_json

__all__ = [
    "decode",
    "decode_blob",
    "decode_frame",
    "encode",
    "encode_blob",
    "encode_frame",
    "encoded_size",
    "to_inspection_json",
]
