"""External payload storage, the Django side: settings, the Django-storage driver, pruning hooks.

The codec (``durable_workflow.codec.external``, pure Python) offloads and
resolves payloads through whichever driver is installed; this module installs
one from ``settings.DURABLE_WORKFLOW`` when the app starts::

    DURABLE_WORKFLOW = {
        "PAYLOAD_STORAGE": "filesystem",          # or "django", "memory", a dotted path
        "PAYLOAD_STORAGE_OPTIONS": {"root": "/srv/dw-payloads"},
        "PAYLOAD_OFFLOAD_THRESHOLD_BYTES": 256 * 1024,
        "PAYLOAD_STORAGE_PREFIX": "dw-payloads/",
    }

Retention: objects are content addressed, so one object can back payloads of
several runs (a continued run's arguments, a child's input, two starts with the
same document).  Pruning therefore deletes an object only when no remaining row
references it: call :func:`references_for_runs` inside the deleting transaction,
before the rows go, and :func:`delete_unreferenced` after it commits.

References are marked with a key derived from ``SECRET_KEY`` (and checked with
``SECRET_KEY_FALLBACKS`` too), so only references the engine wrote are read or
deleted: a caller's memo shaped like one is not (``codec.external``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.crypto import salted_hmac
from django.utils.module_loading import import_string

from durable_workflow.codec import external
from durable_workflow.codec.external import (
    ExternalPayloadIntegrityError,
    ExternalPayloadReference,
    ExternalPayloadUnavailable,
    FilesystemDriver,
    MemoryDriver,
    PayloadStorageDriver,
    StoragePolicy,
)
from durable_workflow.codec.external_drivers import check_key
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.logs import get_logger

__all__ = [
    "DjangoStorageDriver",
    "ExternalPayloadIntegrityError",
    "ExternalPayloadReference",
    "ExternalPayloadUnavailable",
    "FilesystemDriver",
    "MemoryDriver",
    "PayloadStorageDriver",
    "configure_from_settings",
    "delete_unreferenced",
    "live_references",
    "references_for_runs",
]

logger = get_logger("durable_workflow")

#: Pruning spares an unreferenced object written (or re-written) this recently:
#: a workflow task may have stored it and not committed the row that refers to it yet.
DEFAULT_GRACE_SECONDS = 3600


class DjangoStorageDriver:
    """Objects in a Django storage backend (``STORAGES[alias]``): S3, GCS, Azure, local.

    URIs are ``django-storage://<alias>/<name>``; a reference naming another alias
    is refused.  An existing object of the right size is reused (its mtime is
    refreshed when the storage is local); otherwise Django's ``save`` writes it,
    under another name if a partial or different object holds the key.
    """

    scheme = "django-storage"

    def __init__(self, alias: str = "default", storage: Any = None):
        if storage is None:
            from django.core.files.storage import storages

            storage = storages[alias]
        self.alias = alias
        self.storage = storage

    def __repr__(self) -> str:
        return f"DjangoStorageDriver({self.alias!r})"

    def uri(self, name: str) -> str:
        return f"{self.scheme}://{self.alias}/{name}"

    def key_of(self, uri: str) -> str:
        base = f"{self.scheme}://{self.alias}/"
        if not uri.startswith(base):
            raise ValueError(f"{uri!r} does not belong to storage {self.alias!r}")
        name = uri[len(base) :]
        check_key(name)
        return name

    name = key_of

    def put(self, key: str, data: bytes) -> str:
        from django.core.files.base import ContentFile

        check_key(key)
        if self.storage.exists(key) and self.storage.size(key) == len(data):
            self._touch(key)
            return self.uri(key)
        return self.uri(self.storage.save(key, ContentFile(data)))

    def get(self, uri: str) -> bytes:
        name = self.name(uri)
        try:
            with self.storage.open(name, "rb") as handle:
                data: bytes = handle.read()
                return data
        except FileNotFoundError:
            raise
        except Exception:
            if not self.storage.exists(name):
                raise FileNotFoundError(uri) from None
            raise

    def delete(self, uri: str) -> None:
        self.storage.delete(self.name(uri))

    def last_modified(self, uri: str) -> float | None:
        try:
            return float(self.storage.get_modified_time(self.name(uri)).timestamp())
        except (FileNotFoundError, NotImplementedError):
            return None

    def _touch(self, name: str) -> None:
        # Remote storages have no path: they keep the first write time (see delete_unreferenced).
        with contextlib.suppress(NotImplementedError, OSError):
            os.utime(self.storage.path(name))


#: Short names accepted by ``PAYLOAD_STORAGE`` besides dotted paths.
DRIVERS: dict[str, Callable[..., PayloadStorageDriver]] = {
    "filesystem": FilesystemDriver,
    "django": DjangoStorageDriver,
    "memory": MemoryDriver,
}


def _storage_settings(raw: Any) -> tuple[Any, ...]:
    return tuple(
        repr(raw.get(key)) if isinstance(raw, dict) else None
        for key in (
            "PAYLOAD_STORAGE",
            "PAYLOAD_STORAGE_OPTIONS",
            "PAYLOAD_OFFLOAD_THRESHOLD_BYTES",
            "PAYLOAD_STORAGE_PREFIX",
        )
    )


#: Salt of the reference-marking keys: a key of its own, not ``SECRET_KEY`` itself.
_MARK_SALT = "durable_workflow.payload_storage.reference-mark"


def signing_keys() -> tuple[bytes, ...]:
    """Keys that mark stored references: from ``SECRET_KEY``, then each fallback.

    Every process that reads or writes payloads needs the same ``SECRET_KEY``;
    after a rotation, keep the old key in ``SECRET_KEY_FALLBACKS`` until runs
    that stored payloads under it are gone.
    """
    from django.conf import settings as django_settings

    secrets = [django_settings.SECRET_KEY, *getattr(django_settings, "SECRET_KEY_FALLBACKS", [])]
    return tuple(
        salted_hmac(_MARK_SALT, "v1", secret=secret, algorithm="sha256").digest()
        for secret in secrets
        if secret
    )


_applied: tuple[Any, ...] | None = None


def configure_from_settings() -> StoragePolicy | None:
    """Install the driver the settings name (or none); called from ``AppConfig.ready()``."""
    global _applied
    from django.conf import settings as django_settings

    settings = get_settings()
    _applied = _storage_settings(getattr(django_settings, "DURABLE_WORKFLOW", {}) or {})
    path = settings.PAYLOAD_STORAGE
    if not path:
        return external.configure(None)
    if not isinstance(path, str):
        raise ConfigurationError("DURABLE_WORKFLOW['PAYLOAD_STORAGE'] must be a string or None")
    options = settings.PAYLOAD_STORAGE_OPTIONS
    if not isinstance(options, dict):
        raise ConfigurationError("DURABLE_WORKFLOW['PAYLOAD_STORAGE_OPTIONS'] must be a dict")
    try:
        factory = DRIVERS.get(path) or import_string(path)
    except ImportError as exc:
        raise ConfigurationError(f"DURABLE_WORKFLOW['PAYLOAD_STORAGE']: {exc}") from None
    try:
        driver = factory(**options)
    except Exception as exc:  # a missing STORAGES alias, bad options, an unreachable root...
        raise ConfigurationError(
            f"DURABLE_WORKFLOW['PAYLOAD_STORAGE'] {path!r} could not be built from "
            f"PAYLOAD_STORAGE_OPTIONS: {type(exc).__name__}: {exc}"
        ) from None
    prefix = settings.PAYLOAD_STORAGE_PREFIX
    try:
        return external.configure(
            driver,
            threshold_bytes=settings.PAYLOAD_OFFLOAD_THRESHOLD_BYTES,
            prefix=prefix,
            signing_keys=signing_keys(),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"DURABLE_WORKFLOW payload storage: {exc}") from None


@receiver(setting_changed)
def _reconfigure(setting: str, value: Any = None, **kwargs: Any) -> None:
    """``override_settings`` in tests: follow changes of the storage keys and secrets only."""
    secrets = setting in ("SECRET_KEY", "SECRET_KEY_FALLBACKS") and external.current() is not None
    if secrets or (setting == "DURABLE_WORKFLOW" and _storage_settings(value or {}) != _applied):
        get_settings.cache_clear()
        try:
            configure_from_settings()
        except ConfigurationError as exc:  # surfaces again wherever get_settings() is called
            external.configure(None)
            logger.error("payload storage left unconfigured: %s", exc)


# ------------------------------------------------------------------ retention


def payload_columns() -> Iterable[tuple[Any, list[str]]]:
    """Every model of the app with JSON columns, and those columns."""
    from django.apps import apps
    from django.db.models import JSONField

    for model in apps.get_app_config("durable_workflow").get_models():
        fields = [f.name for f in model._meta.concrete_fields if isinstance(f, JSONField)]
        if fields:
            yield model, fields


def _scan(
    model: Any, field: str, row_filter: Any = None
) -> Iterable[external.ExternalPayloadReference]:
    """References in one column, reading only rows whose text names the schema."""
    from django.db.models import TextField
    from django.db.models.functions import Cast

    rows = model._default_manager.annotate(_dw_text=Cast(field, TextField())).filter(
        _dw_text__contains=external.SCHEMA
    )
    if row_filter is not None:
        rows = rows.filter(row_filter)
    for value in rows.values_list(field, flat=True).iterator(chunk_size=500):
        yield from external.references(value)


def references_for_runs(run_ids: Iterable[Any]) -> set[ExternalPayloadReference]:
    """References the engine wrote in the runs' rows (and rows pointing at the runs).

    Call it before deleting the rows.  Over-collecting is harmless:
    ``delete_unreferenced`` keeps whatever a remaining row still references.
    A value that only looks like a reference (in a memo, say) is left out: it
    carries no valid mark, or names a key outside the prefix.
    """
    from django.db.models import Q

    from durable_workflow.models import WorkflowRun

    ids = list(run_ids)
    if not ids:
        return set()
    found: set[ExternalPayloadReference] = set()
    for model, fields in payload_columns():
        if model is WorkflowRun:
            row_filter = Q(pk__in=ids)
        else:
            links = [
                f
                for f in model._meta.concrete_fields
                if f.is_relation and f.related_model is WorkflowRun
            ]
            if not links:
                continue
            row_filter = Q()
            for link in links:
                row_filter |= Q(**{f"{link.attname}__in": ids})
        for field in fields:
            found.update(r for r in _scan(model, field, row_filter) if external.is_trusted(r))
    return found


def live_references() -> set[str]:
    """URIs named by any row of the app (one pass over each JSON column).

    Marked or not: an object any remaining row names is kept.
    """
    uris: set[str] = set()
    for model, fields in payload_columns():
        for field in fields:
            uris.update(reference.uri for reference in _scan(model, field))
    return uris


def delete_unreferenced(
    references: Iterable[ExternalPayloadReference],
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> int:
    """Delete the stored objects of ``references`` that no row references any more.

    Call it after the transaction that deleted the rows has committed (never
    inside it: a rollback would leave rows pointing at deleted objects).  An
    object whose driver reports a write within ``grace_seconds`` is kept, since
    a concurrent workflow task may be about to commit a row that reuses it.
    Only references the engine wrote are followed, and an object is deleted
    only if its size and SHA-256 still match its reference. Returns how many
    objects were deleted; failures and refusals are logged and skipped.
    """
    from durable_workflow.store import database

    if database.in_transaction():
        raise RuntimeError(
            "delete_unreferenced() must run after the deleting transaction commits "
            "(call it after the atomic block, or from transaction.on_commit)"
        )
    candidates = set(references)
    if any(not isinstance(c, ExternalPayloadReference) for c in candidates):
        raise TypeError("delete_unreferenced() takes the references references_for_runs() returns")
    policy = external.current()
    if not candidates:
        return 0
    if policy is None:
        logger.warning(
            "%d external payload object(s) left in place: no payload storage is configured",
            len(candidates),
        )
        return 0
    live = live_references()
    last_modified = getattr(policy.driver, "last_modified", None)
    now = time.time()
    deleted = 0
    for reference in sorted(candidates, key=lambda r: r.uri):
        if reference.uri in live:
            continue
        if not external.is_trusted(reference):
            logger.warning(
                "external payload %s left in place: not a reference the engine wrote", reference.uri
            )
            continue
        try:
            written = last_modified(reference.uri) if last_modified is not None else None
            if written is not None and now - written < grace_seconds:
                continue
            deleted += external.delete(reference)
        except Exception as exc:
            logger.warning("external payload %s left in place: %s", reference.uri, exc)
    return deleted
