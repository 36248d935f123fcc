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

import collections
import contextlib
import dataclasses
import hashlib
import os
import pathlib
import re
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any, Final, Protocol, runtime_checkable

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
    ``put``), which lets pruning spare objects written moments ago.
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
        return cls(uri=uri, sha256=sha256, size_bytes=size, codec=codec, expires_at=expires_at)


def _invalid(message: str) -> PayloadCodecError:
    return PayloadCodecError(INVALID_REFERENCE, message)


# ---------------------------------------------------------------- the registry


@dataclasses.dataclass(frozen=True)
class StoragePolicy:
    """The configured driver, and when new payloads go to it.

    ``threshold_bytes`` of 0 stops offloading new payloads while references
    already in history keep resolving through ``driver``.
    """

    driver: PayloadStorageDriver
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if isinstance(self.threshold_bytes, bool) or not isinstance(self.threshold_bytes, int):
            raise TypeError("threshold_bytes must be an int")
        if self.threshold_bytes < 0:
            raise ValueError("threshold_bytes must be >= 0")
        for method in ("put", "get", "delete"):
            if not callable(getattr(self.driver, method, None)):
                raise TypeError(f"payload storage driver {self.driver!r} has no {method}()")
        _check_key(self.prefix + "k")


_policy: StoragePolicy | None = None


def configure(
    driver: PayloadStorageDriver | None,
    *,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    prefix: str = DEFAULT_PREFIX,
) -> StoragePolicy | None:
    """Install ``driver`` for this process (``None`` turns external storage off)."""
    global _policy
    policy = None if driver is None else StoragePolicy(driver, threshold_bytes, prefix)
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
) -> Iterator[StoragePolicy | None]:
    """Install a driver for the duration of a block (tests), then restore the previous one."""
    global _policy
    previous = _policy
    try:
        yield configure(driver, threshold_bytes=threshold_bytes, prefix=prefix)
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
    return ExternalPayloadReference(uri=uri, sha256=sha256, size_bytes=len(data), codec=codec)


def fetch(reference: ExternalPayloadReference) -> bytes:
    """The referenced bytes, verified against ``size_bytes`` and ``sha256``."""
    policy = _policy
    if policy is None:
        raise PayloadCodecError(
            NOT_CONFIGURED,
            f"payload {reference.uri} is stored externally but no payload storage driver "
            "is configured",
        )
    cache_key = (reference.uri, reference.sha256, reference.size_bytes, reference.codec)
    cached = _cache.get(cache_key)
    if cached is not None:
        return cached
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
    verify(reference, data)
    _cache.put(cache_key, data)
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


def delete(reference: ExternalPayloadReference | str) -> None:
    """Delete a stored object through the configured driver (and forget cached bytes)."""
    uri = reference if isinstance(reference, str) else reference.uri
    policy = _policy
    if policy is None:
        raise PayloadCodecError(NOT_CONFIGURED, "no payload storage driver is configured")
    _cache.discard(uri)
    policy.driver.delete(uri)


def references(value: Any) -> Iterator[ExternalPayloadReference]:
    """Every well-formed reference inside a JSON value (rows, history payloads, exports)."""
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


class _VerifiedCache:
    """Bounded LRU of verified bytes (entry count and total byte ceiling)."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 64 * 1024 * 1024):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[tuple[str, str, int, str], bytes] = (
            collections.OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int, str]) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def put(self, key: tuple[str, str, int, str], data: bytes) -> None:
        if len(data) > self.max_bytes or self.max_entries <= 0:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = data
            self._bytes += len(data)
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= len(evicted)

    def discard(self, uri: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == uri]:
                self._bytes -= len(self._items.pop(key))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)


_cache = _VerifiedCache()


def clear_cache() -> None:
    """Forget verified bytes (the next decode fetches and verifies again)."""
    _cache.clear()


# ------------------------------------------------------------------- drivers


def _check_key(key: str) -> None:
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or "\x00" in key
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(f"invalid payload storage key or prefix {key!r}")


class FilesystemDriver:
    """``file://`` objects under a root directory shared by every worker.

    Writes go to a temporary file renamed into place, so a reader never sees a
    partial object.  URIs outside ``root`` (after resolving symlinks) are refused.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = pathlib.Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"FilesystemDriver({str(self.root)!r})"

    def _path(self, uri: str) -> pathlib.Path:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise ValueError(f"{uri!r} is not a local file:// URI")
        path = pathlib.Path(urllib.parse.unquote(parts.path)).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise ValueError(f"{uri!r} is outside {self.root}")
        return path

    def put(self, key: str, data: bytes) -> str:
        _check_key(key)
        path = self.root / key
        if path.is_file() and path.stat().st_size == len(data):
            os.utime(path)  # same key, same bytes: only mark it as written now
            return path.as_uri()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path.as_uri()

    def get(self, uri: str) -> bytes:
        return self._path(uri).read_bytes()

    def delete(self, uri: str) -> None:
        self._path(uri).unlink(missing_ok=True)

    def last_modified(self, uri: str) -> float | None:
        try:
            return self._path(uri).stat().st_mtime
        except FileNotFoundError:
            return None


class MemoryDriver:
    """``memory://<name>/<key>`` objects in a dict: tests and single-process experiments."""

    def __init__(self, name: str = "default"):
        self.name = name
        self.objects: dict[str, bytes] = {}
        self.written: dict[str, float] = {}
        self.puts = 0

    def __repr__(self) -> str:
        return f"MemoryDriver({self.name!r})"

    def uri(self, key: str) -> str:
        return f"memory://{self.name}/{key}"

    def key(self, uri: str) -> str:
        base = f"memory://{self.name}/"
        if not uri.startswith(base):
            raise ValueError(f"{uri!r} does not belong to {self!r}")
        return uri[len(base) :]

    def put(self, key: str, data: bytes) -> str:
        _check_key(key)
        self.puts += 1
        self.objects.setdefault(key, bytes(data))
        self.written[key] = time.time()
        return self.uri(key)

    def get(self, uri: str) -> bytes:
        key = self.key(uri)
        try:
            return self.objects[key]
        except KeyError:
            raise FileNotFoundError(uri) from None

    def delete(self, uri: str) -> None:
        key = self.key(uri)
        self.objects.pop(key, None)
        self.written.pop(key, None)

    def last_modified(self, uri: str) -> float | None:
        return self.written.get(self.key(uri))
