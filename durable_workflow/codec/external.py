"""External payload storage: large encoded payloads live in a driver, rows keep a reference.

When a driver is configured and an encoded payload is at or over the threshold,
``envelope.encode`` stores the encoded bytes (the Avro single-object frame, or
the UTF-8 text of a JSON blob) through the driver and returns::

    {"codec": "avro", "external_storage": {
        "schema": "durable-workflow.v2.external-payload-reference.v1",
        "uri": "file:///var/lib/dw/payloads/dw-payloads/ab/ab12...",
        "sha256": "ab12...", "size_bytes": 1048586, "codec": "avro"}}

``envelope.decode`` fetches the bytes, checks ``size_bytes`` and ``sha256``
*before* decoding, and fails closed: a missing or altered object raises
:class:`ExternalPayloadIntegrityError`, never a substitute value.

Only references the engine wrote are followed. Rows also hold JSON a caller
chose (a memo, labels, signal arguments), and a value there can be shaped like
a reference; followed, it would read or delete any object of a storage that
may be shared with the application's files. So ``store`` adds a ``mac`` to
each reference (HMAC-SHA256 of its fields under the policy's signing key,
derived from Django's ``SECRET_KEY``), and reading or deleting needs a valid
mark *and* a key inside the configured prefix; deleting also re-checks the
object's size and SHA-256. Anything else fails closed as
``untrusted_external_payload_reference``.

Keys are content addressed (``<prefix><sha256[:2]>/<sha256>``), so writing the
same payload twice is idempotent and replays that re-encode a command write
nothing new.  Only verified *bytes* are cached (bounded, keyed by uri, hash,
size and codec); every decode builds fresh objects, so a workflow that mutates
a decoded value cannot change what a later replay sees.

This module is pure Python (no Django, no Celery): the engine's codec calls it.
Drivers are plain objects; ``durable_workflow.payload_storage`` adds the
Django-storage driver and configures this module from settings at app start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterator
from typing import Any, Final, Protocol, runtime_checkable

from durable_workflow.codec.external_cache import VerifiedCache
from durable_workflow.codec.external_drivers import FilesystemDriver as FilesystemDriver
from durable_workflow.codec.external_drivers import MemoryDriver as MemoryDriver
from durable_workflow.codec.external_drivers import check_key
from durable_workflow.exceptions import DurableWorkflowError, PayloadCodecError

SCHEMA: Final = "durable-workflow.v2.external-payload-reference.v1"
#: Envelope key that replaces ``blob`` when the payload is stored externally.
ENVELOPE_KEY: Final = "external_storage"
DEFAULT_THRESHOLD_BYTES: Final = 256 * 1024
DEFAULT_PREFIX: Final = "dw-payloads/"

#: Reason codes (``PayloadCodecError.reason``).
INTEGRITY: Final = "external_payload_integrity"
INVALID_REFERENCE: Final = "invalid_external_payload_reference"
NOT_CONFIGURED: Final = "external_payload_storage_not_configured"
UNTRUSTED: Final = "untrusted_external_payload_reference"

_SHA256 = re.compile(r"[0-9a-f]{64}")


class ExternalPayloadIntegrityError(PayloadCodecError):
    """The referenced object is missing, or its size or SHA-256 differs from the reference.

    A ``PayloadCodecError`` with reason ``external_payload_integrity``: the workflow
    task fails (the run is left as it is) and an activity fails without retry.
    """

    def __init__(self, message: str, *, uri: str = ""):
        self.uri = uri
        super().__init__(INTEGRITY, message)


class ExternalPayloadUnavailable(DurableWorkflowError):
    """The driver raised (I/O, network, permissions) while storing or fetching.

    Deliberately *not* a ``PayloadCodecError``: nothing is known to be wrong with
    the payload, so the usual retries (activity retry policy, workflow task
    redelivery) apply.
    """


@runtime_checkable
class PayloadStorageDriver(Protocol):
    """What a driver provides.

    ``put(key, data)`` stores ``data`` under ``key`` and returns the object's URI.
    Keys are content addressed, so an existing object under the same key already
    holds the same bytes: a driver may skip the write, but should refresh the
    object's modification time (see ``last_modified``).

    ``get(uri)`` returns the stored bytes; raises ``FileNotFoundError`` when no
    object exists and ``ValueError`` when the URI is not one this driver owns
    (another scheme, root or storage, or a path escaping the root).

    ``delete(uri)`` removes the object; a missing object is not an error.

    Optional: ``last_modified(uri) -> float | None`` (POSIX time of the last
    ``put``), which lets pruning spare objects written moments ago; and
    ``key_of(uri) -> str`` (the key a URI names, ``ValueError`` for a URI the
    driver does not own), which lets the codec refuse references outside the
    configured prefix. The built-in drivers have both.
    """

    def put(self, key: str, data: bytes) -> str: ...

    def get(self, uri: str) -> bytes: ...

    def delete(self, uri: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class ExternalPayloadReference:
    """The wire reference ``durable-workflow.v2.external-payload-reference.v1``."""

    uri: str
    sha256: str
    size_bytes: int
    codec: str
    expires_at: str | None = None
    #: The engine's mark (hex HMAC-SHA256 of the fields above); ``None`` when absent.
    mac: str | None = None

    def signed_text(self) -> bytes:
        """What the mark is computed over: the fields, as one unambiguous JSON array."""
        fields = [SCHEMA, self.uri, self.sha256, self.size_bytes, self.codec, self.expires_at]
        return json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "uri": self.uri,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "codec": self.codec,
        }
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at
        if self.mac is not None:
            out["mac"] = self.mac
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> ExternalPayloadReference:
        """Validate a stored reference; anything malformed fails closed."""
        if not isinstance(raw, dict):
            raise _invalid(f"reference is {type(raw).__name__}, not an object")
        if raw.get("schema") != SCHEMA:
            raise _invalid(f"unsupported reference schema {raw.get('schema')!r}")
        uri, sha256, size, codec = (raw.get(k) for k in ("uri", "sha256", "size_bytes", "codec"))
        expires_at = raw.get("expires_at")
        if not isinstance(uri, str) or not uri:
            raise _invalid("'uri' must be a non-empty string")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise _invalid("'sha256' must be 64 lowercase hex digits")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise _invalid("'size_bytes' must be an integer >= 0")
        if not isinstance(codec, str) or not codec:
            raise _invalid("'codec' must be a non-empty string")
        if expires_at is not None and not isinstance(expires_at, str):
            raise _invalid("'expires_at' must be an ISO-8601 string when present")
        mac = raw.get("mac")
        if mac is not None and (not isinstance(mac, str) or not _SHA256.fullmatch(mac)):
            raise _invalid("'mac' must be 64 lowercase hex digits when present")
        return cls(
            uri=uri, sha256=sha256, size_bytes=size, codec=codec, expires_at=expires_at, mac=mac
        )


def _invalid(message: str) -> PayloadCodecError:
    return PayloadCodecError(INVALID_REFERENCE, message)


# ---------------------------------------------------------------- the registry


@dataclasses.dataclass(frozen=True)
class StoragePolicy:
    """The configured driver, and when new payloads go to it.

    ``threshold_bytes`` of 0 stops offloading new payloads while references
    already in history keep resolving through ``driver``. ``signing_keys``
    mark the references ``store`` writes (the first) and check the marks of
    the references read or deleted (any of them, so a key can be rotated). A
    policy built without keys uses a random key of this process: only this
    process can then read what it stored (tests, single-process experiments).
    """

    driver: PayloadStorageDriver
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    prefix: str = DEFAULT_PREFIX
    signing_keys: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not self.signing_keys:
            object.__setattr__(self, "signing_keys", (_PROCESS_KEY,))
        if not all(isinstance(key, bytes) and len(key) >= 16 for key in self.signing_keys):
            raise TypeError("signing_keys must be bytes of at least 16 bytes each")
        if isinstance(self.threshold_bytes, bool) or not isinstance(self.threshold_bytes, int):
            raise TypeError("threshold_bytes must be an int")
        if self.threshold_bytes < 0:
            raise ValueError("threshold_bytes must be >= 0")
        for method in ("put", "get", "delete"):
            if not callable(getattr(self.driver, method, None)):
                raise TypeError(f"payload storage driver {self.driver!r} has no {method}()")
        check_key(self.prefix + "k")

    def mark(self, reference: ExternalPayloadReference) -> ExternalPayloadReference:
        mac = hmac.new(self.signing_keys[0], reference.signed_text(), hashlib.sha256)
        return dataclasses.replace(reference, mac=mac.hexdigest())

    def refusal(self, reference: ExternalPayloadReference) -> str | None:
        """Why this policy must not follow ``reference``; ``None`` when it may."""
        if reference.mac is None:
            return "it carries no mark of this engine"
        text = reference.signed_text()
        if not any(
            hmac.compare_digest(reference.mac, hmac.new(key, text, hashlib.sha256).hexdigest())
            for key in self.signing_keys
        ):
            return "its mark is not this engine's (another SECRET_KEY, or edited)"
        key_of = getattr(self.driver, "key_of", None)
        if key_of is None:
            return None  # the driver cannot say which key a URI names: the mark must do
        try:
            key = key_of(reference.uri)
        except ValueError as exc:
            return f"the configured storage does not own it ({exc})"
        if not isinstance(key, str) or not key.startswith(self.prefix):
            return f"its key {key!r} is outside the prefix {self.prefix!r}"
        return None


#: The signing key of policies configured without one (see ``StoragePolicy``).
_PROCESS_KEY: Final = secrets.token_bytes(32)

_policy: StoragePolicy | None = None


def configure(
    driver: PayloadStorageDriver | None,
    *,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    prefix: str = DEFAULT_PREFIX,
    signing_keys: tuple[bytes, ...] = (),
) -> StoragePolicy | None:
    """Install ``driver`` for this process (``None`` turns external storage off)."""
    global _policy
    policy = (
        None
        if driver is None
        else StoragePolicy(driver, threshold_bytes, prefix, tuple(signing_keys))
    )
    _policy = policy
    clear_cache()
    return policy


def current() -> StoragePolicy | None:
    """The installed policy, if any."""
    return _policy


@contextlib.contextmanager
def using(
    driver: PayloadStorageDriver | None,
    *,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    prefix: str = DEFAULT_PREFIX,
    signing_keys: tuple[bytes, ...] = (),
) -> Iterator[StoragePolicy | None]:
    """Install a driver for the duration of a block (tests), then restore the previous one."""
    global _policy
    previous = _policy
    try:
        yield configure(
            driver, threshold_bytes=threshold_bytes, prefix=prefix, signing_keys=signing_keys
        )
    finally:
        _policy = previous
        clear_cache()


def offload_threshold() -> int | None:
    """Bytes at or over which a new payload is offloaded; ``None`` when nothing is."""
    policy = _policy
    if policy is None or policy.threshold_bytes <= 0:
        return None
    return policy.threshold_bytes


def key_for(sha256: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The content-addressed object key of a payload."""
    return f"{prefix}{sha256[:2]}/{sha256}"


# ------------------------------------------------------------ store and fetch


def store(data: bytes, codec: str) -> ExternalPayloadReference:
    """Write encoded bytes through the configured driver; the reference to record."""
    policy = _policy
    if policy is None:
        raise PayloadCodecError(NOT_CONFIGURED, "no payload storage driver is configured")
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        uri = policy.driver.put(key_for(sha256, policy.prefix), data)
    except Exception as exc:
        raise ExternalPayloadUnavailable(
            f"payload storage put failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(uri, str) or not uri:
        raise ExternalPayloadUnavailable(f"payload storage put returned {uri!r}, not a URI")
    reference = ExternalPayloadReference(uri=uri, sha256=sha256, size_bytes=len(data), codec=codec)
    return policy.mark(reference)


def _policy_for(reference: ExternalPayloadReference) -> StoragePolicy:
    """The installed policy, if it may follow ``reference`` (else fail closed)."""
    policy = _policy
    if policy is None:
        raise PayloadCodecError(
            NOT_CONFIGURED,
            f"payload {reference.uri} is stored externally but no payload storage driver "
            "is configured",
        )
    refusal = policy.refusal(reference)
    if refusal is not None:
        raise PayloadCodecError(
            UNTRUSTED, f"refusing to follow the reference to {reference.uri!r}: {refusal}"
        )
    return policy


def is_trusted(reference: ExternalPayloadReference) -> bool:
    """Whether the installed policy may read or delete what ``reference`` names."""
    return _policy is not None and _policy.refusal(reference) is None


def fetch(reference: ExternalPayloadReference) -> bytes:
    """The referenced bytes, verified against ``size_bytes`` and ``sha256``."""
    policy = _policy_for(reference)
    cache_key = (reference.uri, reference.sha256, reference.size_bytes, reference.codec)
    cached = _cache.get(cache_key)
    if cached is not None:
        return cached
    data = _read(policy, reference)
    verify(reference, data)
    _cache.put(cache_key, data)
    return data


def _read(policy: StoragePolicy, reference: ExternalPayloadReference) -> bytes:
    try:
        data = policy.driver.get(reference.uri)
    except (FileNotFoundError, KeyError):
        raise ExternalPayloadIntegrityError(
            f"stored payload {reference.uri} is missing", uri=reference.uri
        ) from None
    except PayloadCodecError:
        raise
    except ValueError as exc:
        raise _invalid(
            f"{reference.uri} is not a URI the configured payload storage owns: {exc}"
        ) from None
    except Exception as exc:
        raise ExternalPayloadUnavailable(
            f"payload storage get of {reference.uri} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise ExternalPayloadIntegrityError(
            f"driver returned {type(data).__name__} for {reference.uri}, not bytes",
            uri=reference.uri,
        )
    return data


def verify(reference: ExternalPayloadReference, data: bytes) -> None:
    """Raise ``ExternalPayloadIntegrityError`` unless ``data`` matches the reference."""
    if len(data) != reference.size_bytes:
        raise ExternalPayloadIntegrityError(
            f"stored payload {reference.uri} is {len(data)} bytes, "
            f"the reference says {reference.size_bytes}",
            uri=reference.uri,
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != reference.sha256:
        raise ExternalPayloadIntegrityError(
            f"stored payload {reference.uri} has SHA-256 {digest}, "
            f"the reference says {reference.sha256}",
            uri=reference.uri,
        )


def delete(reference: ExternalPayloadReference) -> bool:
    """Delete the object of a reference the engine wrote, once its bytes check out.

    Returns ``False`` when the object is already gone. Raises like ``fetch``
    for a reference the engine did not write, or an object whose size or
    SHA-256 differs (then it is left in place: it is not what the engine wrote).
    """
    policy = _policy_for(reference)
    _cache.discard(reference.uri)
    try:
        data = policy.driver.get(reference.uri)
    except (FileNotFoundError, KeyError):
        return False
    verify(reference, bytes(data))
    policy.driver.delete(reference.uri)
    return True


def references(value: Any) -> Iterator[ExternalPayloadReference]:
    """Every well-formed reference inside a JSON value (rows, history payloads, exports).

    Marked or not: callers that follow them must check ``is_trusted`` (``fetch``
    and ``delete`` do). Pruning keeps any object a remaining row names this way.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            raw = item.get(ENVELOPE_KEY)
            if isinstance(raw, dict) and raw.get("schema") == SCHEMA:
                reference = None
                with contextlib.suppress(PayloadCodecError):
                    reference = ExternalPayloadReference.from_dict(raw)
                if reference is not None:
                    yield reference
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# ------------------------------------------------------- verified-bytes cache

_cache = VerifiedCache()


def clear_cache() -> None:
    """Forget verified bytes (the next decode fetches and verifies again)."""
    _cache.clear()
