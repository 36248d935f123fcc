"""Payload codec chain: byte transforms (compression, encryption) applied after encoding.

With a chain configured (``PAYLOAD_CODECS``), ``envelope.encode`` turns the
encoded payload (the Avro single-object frame, or the UTF-8 text of a JSON
blob) into bytes, runs them through each transform in order, and stores::

    {"codec": "avro", "encodings": ["zlib", "aes-gcm"], "size_bytes": 1234,
     "blob": "<base64 of the transformed bytes>"}

``encodings`` lists the transforms in the order they were applied; decoding
undoes them in reverse, each found by name among the transforms this process
knows (so a payload written under an older chain still decodes after the
chain changes, as long as its transforms, and keys, are still configured).
``size_bytes`` is the encoded size before the chain: payload limits measure
the same number with or without codecs.  External payload storage sits after
the chain, so an offloaded payload holds the transformed (encrypted) bytes.

Envelopes without ``encodings`` (every payload written before a chain was
configured) decode exactly as before, and with no chain configured ``encode``
does no extra work.

This module is pure Python (no Django): ``durable_workflow.payload_codecs``
configures it from settings when the app starts.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from durable_workflow.exceptions import PayloadCodecError

#: Envelope key naming the transforms applied, in order.
ENCODINGS_KEY: Final = "encodings"
#: Envelope key with the encoded size before the chain (what payload limits measure).
SIZE_KEY: Final = "size_bytes"

#: Reason codes (``PayloadCodecError.reason``).
UNKNOWN_ENCODING: Final = "unknown_payload_encoding"
KEY_UNAVAILABLE: Final = "payload_key_unavailable"
DECRYPTION_FAILED: Final = "payload_decryption_failed"
CORRUPT: Final = "corrupt_payload_encoding"

#: Ceiling on what one decompression may produce (a small stored blob cannot expand unbounded).
DEFAULT_MAX_DECODED_BYTES: Final = 64 * 1024 * 1024


class PayloadKeyUnavailable(PayloadCodecError):
    """An encrypted payload names a key id this process does not hold.

    Raised with reason ``payload_key_unavailable``; ``key_id`` is the id recorded
    with the payload.  Like every ``PayloadCodecError`` it fails the workflow task
    (the run is left as it is) rather than the worker.
    """

    def __init__(self, key_id: str, message: str = ""):
        self.key_id = key_id
        super().__init__(KEY_UNAVAILABLE, message or f"no payload key with id {key_id!r}")


@runtime_checkable
class PayloadTransform(Protocol):
    """One link of the chain: a reversible transform of bytes with a stable name.

    ``name`` is stored in each payload it encoded, so it must never change for
    payloads that exist.  ``decode`` must raise ``PayloadCodecError`` (never
    another exception) for bytes it cannot undo.
    """

    name: str

    def encode(self, data: bytes) -> bytes: ...

    def decode(self, data: bytes) -> bytes: ...


class ZlibTransform:
    """Compression with the standard library's zlib (DEFLATE)."""

    name = "zlib"

    def __init__(self, level: int = 6, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES):
        if not -1 <= level <= 9:
            raise ValueError("zlib level must be between -1 and 9")
        self.level = level
        self.max_decoded_bytes = max_decoded_bytes

    def encode(self, data: bytes) -> bytes:
        return zlib.compress(data, self.level)

    def decode(self, data: bytes) -> bytes:
        inflater = zlib.decompressobj()
        try:
            out = inflater.decompress(data, self.max_decoded_bytes)
        except zlib.error as exc:
            raise PayloadCodecError(CORRUPT, f"zlib: {exc}") from None
        if inflater.unconsumed_tail:
            raise PayloadCodecError(
                CORRUPT, f"zlib: decompresses to more than {self.max_decoded_bytes} bytes"
            )
        if not inflater.eof or inflater.unused_data:
            raise PayloadCodecError(CORRUPT, "zlib: truncated or trailing data")
        return out


class ZstdTransform:
    """Compression with Zstandard, when the ``zstandard`` package is installed."""

    name = "zstd"

    def __init__(self, level: int = 3, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES):
        import zstandard  # type: ignore[import-not-found]

        self._module: Any = zstandard
        self.level = level
        self.max_decoded_bytes = max_decoded_bytes

    def encode(self, data: bytes) -> bytes:
        return bytes(self._module.ZstdCompressor(level=self.level).compress(data))

    def decode(self, data: bytes) -> bytes:
        try:
            reader = self._module.ZstdDecompressor().decompressobj()
            out = bytes(reader.decompress(data))
        except self._module.ZstdError as exc:
            raise PayloadCodecError(CORRUPT, f"zstd: {exc}") from None
        if len(out) > self.max_decoded_bytes or not reader.eof:
            raise PayloadCodecError(CORRUPT, "zstd: truncated or oversized data")
        return out


def zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- configuration

#: The transforms ``encode`` applies, in order; ``None`` when no chain is configured.
ENCODERS: tuple[PayloadTransform, ...] | None = None
#: Every transform this process can undo, by name (a superset of ``ENCODERS``).
_decoders: dict[str, PayloadTransform] = {"zlib": ZlibTransform()}


def configure(chain: Sequence[PayloadTransform], decoders: Iterable[PayloadTransform] = ()) -> None:
    """Install ``chain`` for encoding; ``decoders`` are extra transforms kept for decoding only.

    The transforms of ``chain`` decode too; zlib always does.
    """
    global ENCODERS, _decoders
    known: dict[str, PayloadTransform] = {"zlib": ZlibTransform()}
    for transform in (*decoders, *chain):
        if not isinstance(transform.name, str) or not transform.name:
            raise ValueError(f"payload transform {transform!r} needs a non-empty name")
        known[transform.name] = transform
    names = [t.name for t in chain]
    if len(set(names)) != len(names):
        raise ValueError(f"payload codec chain names a transform twice: {names}")
    _decoders = known
    ENCODERS = tuple(chain) or None


def current() -> tuple[PayloadTransform, ...]:
    return ENCODERS or ()


def decoder(name: str) -> PayloadTransform | None:
    return _decoders.get(name)


@contextlib.contextmanager
def using(
    chain: Sequence[PayloadTransform], decoders: Iterable[PayloadTransform] = ()
) -> Iterator[None]:
    """Configure a chain for the block, then restore the previous one (tests)."""
    saved = (ENCODERS, _decoders)
    configure(chain, decoders)
    try:
        yield
    finally:
        _restore(saved)


_Saved = tuple[tuple[PayloadTransform, ...] | None, dict[str, PayloadTransform]]


def _restore(saved: _Saved) -> None:
    global ENCODERS, _decoders
    ENCODERS, _decoders = saved


# ---------------------------------------------------------------- applying


def apply(chain: tuple[PayloadTransform, ...], data: bytes) -> bytes:
    """Run ``data`` through ``chain`` in order."""
    for transform in chain:
        data = transform.encode(data)
    return data


def parse_encodings(raw: object) -> list[str]:
    """The ``encodings`` list of an envelope, validated (hostile rows get a typed error)."""
    if not isinstance(raw, list) or not raw or not all(isinstance(n, str) for n in raw):
        raise PayloadCodecError(CORRUPT, "'encodings' must be a non-empty list of names")
    return raw


def undo(encodings: list[str], data: bytes) -> bytes:
    """Undo the transforms ``encodings`` names, last applied first."""
    for name in reversed(encodings):
        transform = _decoders.get(name)
        if transform is None:
            raise PayloadCodecError(
                UNKNOWN_ENCODING,
                f"payload was encoded with {name!r}, which is not configured here "
                "(PAYLOAD_CODECS / PAYLOAD_ENCRYPTION_KEYS)",
            )
        try:
            data = transform.decode(data)
        except PayloadCodecError:
            raise
        except Exception as exc:  # a custom transform's own failure stays typed
            raise PayloadCodecError(CORRUPT, f"{name}: {type(exc).__name__}: {exc}") from None
    return data


def parse_size(raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise PayloadCodecError(CORRUPT, "'size_bytes' must be an integer >= 0")
    return raw
