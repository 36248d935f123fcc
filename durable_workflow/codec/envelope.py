"""The stored payload envelope ``{"codec": <name>, "blob": <text>}``.

A payload is only ever decoded with the codec its envelope names; when the
caller knows which codec a run was started with, a mismatch is refused rather
than transcoded.  Anything that is not a tagged envelope is refused too.

With a payload storage driver configured (``codec.external``), a payload whose
encoded bytes are at or over the threshold is stored through the driver and
the envelope carries a verifiable reference instead of the blob:
``{"codec": <name>, "external_storage": {<reference>}}``.

With a codec chain configured (``codec.chain``), the encoded bytes go through
its transforms first and the envelope records them:
``{"codec": <name>, "encodings": [...], "size_bytes": <n>, "blob": <base64>}``
(or the reference, when the transformed bytes are offloaded).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Final, Protocol

from durable_workflow.codec import avro, chain, external, json_codec
from durable_workflow.exceptions import PayloadCodecError


class PayloadCodec(Protocol):
    """What a codec module provides (``avro`` and ``json_codec`` both do)."""

    def encode_blob(self, value: Any) -> str: ...

    def decode_blob(self, blob: str) -> Any: ...


CODECS: Final[dict[str, PayloadCodec]] = {"avro": avro, "json": json_codec}
DEFAULT_CODEC: Final = "avro"


def _codec(name: object) -> PayloadCodec:
    module = CODECS.get(name) if isinstance(name, str) else None
    if module is None:
        raise PayloadCodecError("unsupported_payload_codec", f"unknown payload codec {name!r}")
    return module


def _open(
    envelope: object, expected_codec: str | None = None
) -> tuple[str, str | None, external.ExternalPayloadReference | None]:
    """Return (codec name, blob, reference) of a well-formed envelope, or raise.

    Exactly one of blob and reference is set.
    """
    if not isinstance(envelope, dict):
        raise PayloadCodecError(
            "unsupported_payload_codec", f"untagged payload of type {type(envelope).__name__}"
        )
    name = envelope.get("codec")
    blob = envelope.get("blob")
    raw_reference = envelope.get(external.ENVELOPE_KEY)
    if not isinstance(name, str) or not (
        isinstance(blob, str) if raw_reference is None else blob is None
    ):
        raise PayloadCodecError(
            "unsupported_payload_codec",
            "envelope needs a string 'codec' and either a string 'blob' or an "
            "'external_storage' reference",
        )
    if expected_codec is not None and name != expected_codec:
        raise PayloadCodecError(
            "unsupported_payload_codec", f"payload uses {name!r} but {expected_codec!r} is required"
        )
    if raw_reference is None:
        return name, blob, None
    _codec(name)
    reference = external.ExternalPayloadReference.from_dict(raw_reference)
    if reference.codec != name:
        raise PayloadCodecError(
            external.INVALID_REFERENCE,
            f"reference codec {reference.codec!r} differs from the envelope's {name!r}",
        )
    return name, None, reference


def _to_bytes(name: str, value: Any) -> bytes | str:
    """The encoded payload: Avro gives the raw frame, text codecs their blob."""
    if name == "avro":
        return avro.encode_frame(value)
    return _codec(name).encode_blob(value)


def _size(encoded: bytes | str) -> int:
    if isinstance(encoded, bytes) or encoded.isascii():
        return len(encoded)
    return len(encoded.encode("utf-8", "surrogatepass"))


def _from_bytes(name: str, data: bytes) -> Any:
    """Decode bytes fetched from external storage (the inverse of ``_to_bytes``)."""
    if name == "avro":
        return avro.decode_frame(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadCodecError("invalid_payload_framing", f"stored text: {exc}") from None
    return _codec(name).decode_blob(text)


def encode(value: Any, codec: str = DEFAULT_CODEC) -> dict[str, Any]:
    """Wrap ``value`` in an envelope tagged with ``codec`` (offloaded when large)."""
    module = _codec(codec)
    if chain.ENCODERS is not None:
        return _encode_chained(chain.ENCODERS, value, codec)
    threshold = external.offload_threshold()
    if threshold is None:
        return {"codec": codec, "blob": module.encode_blob(value)}
    encoded = _to_bytes(codec, value)
    if _size(encoded) < threshold:
        if isinstance(encoded, bytes):
            return {"codec": codec, "blob": base64.b64encode(encoded).decode("ascii")}
        return {"codec": codec, "blob": encoded}
    data = encoded if isinstance(encoded, bytes) else encoded.encode("utf-8")
    return {"codec": codec, external.ENVELOPE_KEY: external.store(data, codec).to_dict()}


def _encode_chained(
    transforms: tuple[chain.PayloadTransform, ...], value: Any, codec: str
) -> dict[str, Any]:
    """The envelope of ``value`` run through the configured transforms."""
    encoded = _to_bytes(codec, value)
    size = _size(encoded)
    data = chain.apply(transforms, encoded if isinstance(encoded, bytes) else encoded.encode())
    result: dict[str, Any] = {
        "codec": codec,
        chain.ENCODINGS_KEY: [t.name for t in transforms],
        chain.SIZE_KEY: size,
    }
    threshold = external.offload_threshold()
    if threshold is not None and len(data) >= threshold:
        result[external.ENVELOPE_KEY] = external.store(data, codec).to_dict()
    else:
        result["blob"] = base64.b64encode(data).decode("ascii")
    return result


def _decode_chained(
    envelope: dict[str, Any],
    name: str,
    blob: str | None,
    reference: external.ExternalPayloadReference | None,
) -> Any:
    encodings = chain.parse_encodings(envelope[chain.ENCODINGS_KEY])
    if reference is not None:
        data = external.fetch(reference)
    else:
        try:
            data = base64.b64decode(blob or "", validate=True)
        except ValueError:
            raise PayloadCodecError("invalid_payload_framing", "blob is not base64") from None
    return _from_bytes(name, chain.undo(encodings, data))


def decode(envelope: Any, expected_codec: str | None = None) -> Any:
    """Decode an envelope with the codec it names (which must equal ``expected_codec``).

    An external reference is fetched and verified (size, then SHA-256) first;
    the transforms an envelope's ``encodings`` names are undone before decoding.
    """
    name, blob, reference = _open(envelope, expected_codec)
    module = _codec(name)
    if chain.ENCODINGS_KEY in envelope:
        return _decode_chained(envelope, name, blob, reference)
    if reference is None:
        return module.decode_blob(blob)  # type: ignore[arg-type]
    return _from_bytes(name, external.fetch(reference))


def encodings(envelope: Any) -> list[str]:
    """The transforms a stored envelope went through (empty for a plain one)."""
    if isinstance(envelope, dict) and chain.ENCODINGS_KEY in envelope:
        return chain.parse_encodings(envelope[chain.ENCODINGS_KEY])
    return []


def is_external(envelope: Any) -> bool:
    """Whether ``envelope`` carries an external storage reference instead of a blob."""
    return isinstance(envelope, dict) and external.ENVELOPE_KEY in envelope


def encoded_size(envelope: Any) -> int:
    """Size in bytes that payload limits are measured against.

    For Avro that is the raw single-object frame (computed from the base64
    length without decoding it); for JSON, the UTF-8 length of the text.  An
    externally stored payload reports the size its reference records (the real
    payload, not the reference), without fetching it.
    """
    name, blob, reference = _open(envelope)
    _codec(name)
    if chain.ENCODINGS_KEY in envelope:
        return chain.parse_size(envelope.get(chain.SIZE_KEY))
    if reference is not None:
        return reference.size_bytes
    assert blob is not None
    if name == "avro":
        if len(blob) % 4:
            raise PayloadCodecError(
                "invalid_payload_framing", "base64 length is not a multiple of 4"
            )
        return len(blob) // 4 * 3 - blob[-2:].count("=")
    if blob.isascii():
        return len(blob)
    return len(blob.encode("utf-8", "surrogatepass"))


# PHP turns canonical decimal-integer keys into int keys, so such maps cannot be shown as plain
# JSON objects without losing their type; "$type" is reserved by the projection itself.
_INTEGER_KEY = re.compile(r"(?:0|-?[1-9][0-9]{0,18})")


def _plain_json_key(key: object) -> bool:
    if not isinstance(key, str) or key == "$type":
        return False
    if _INTEGER_KEY.fullmatch(key) is None:
        return True
    return not avro.INT64_MIN <= int(key) <= avro.INT64_MAX


def to_inspection_json(value: Any) -> Any:
    """Project a decoded value onto plain JSON for display (admin pages, CLI).

    Bytes become ``{"$type": "bytes", "base64": ...}``; empty maps, and maps whose
    keys look like integers, become ``{"$type": "map", "entries": [...]}``.  The
    projection is lossy by design: the envelope stays the authority.
    """
    if isinstance(value, dict):
        if not value or not all(_plain_json_key(k) for k in value):
            return {
                "$type": "map",
                "entries": [{"key": k, "value": to_inspection_json(v)} for k, v in value.items()],
            }
        return {k: to_inspection_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_inspection_json(v) for v in value]
    if isinstance(value, bytes):
        return {"$type": "bytes", "base64": base64.b64encode(value).decode("ascii")}
    return value
