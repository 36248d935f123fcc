"""Rewrite stored payloads under the current encryption key, in batches.

Every JSON column of the app is scanned in primary-key order, reading only rows
whose text mentions ``"encodings"``; each envelope whose ``aes-gcm`` frame names
another key id than ``PAYLOAD_ENCRYPTION_KEY_ID`` is re-encoded through the
chain configured now.  A batch is one transaction that locks its rows
(``SELECT ... FOR UPDATE`` where the database has it), so a worker writing the
same row waits rather than being overwritten.

Resuming is safe: rewritten payloads name the current key and are skipped, so
an interrupted pass just runs again (``after`` skips tables already done).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast

from durable_workflow.codec import rekey
from durable_workflow.exceptions import PayloadCodecError
from durable_workflow.payload_codecs import current_key_id
from durable_workflow.payload_storage import payload_columns
from durable_workflow.store import database


@dataclasses.dataclass
class Progress:
    """What a pass found and did: envelopes by the key id they were written with."""

    rows_scanned: int = 0
    rows_rewritten: int = 0
    envelopes_rewritten: int = 0
    by_key: Counter[str] = dataclasses.field(default_factory=Counter)
    errors: list[str] = dataclasses.field(default_factory=list)


def _rewriter(
    current: str, progress: Progress, dry_run: bool, where: str
) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def visit(env: dict[str, Any]) -> dict[str, Any] | None:
        try:
            found = rekey.key_id(env)
            if found is None or found == current:
                return None
            progress.by_key[found] += 1
            return None if dry_run else rekey.rewrite(env)
        except PayloadCodecError as exc:
            progress.errors.append(f"{where}: {exc.reason}: {exc}")
            return None

    return visit


def _batches(model: Any, field: str, size: int) -> Iterator[list[Any]]:
    rows = (
        model._default_manager.annotate(_dw_text=Cast(field, TextField()))
        .filter(_dw_text__contains='"encodings"')
        .order_by("pk")
    )
    last = None
    while True:
        page = rows if last is None else rows.filter(pk__gt=last)
        keys = list(page.values_list("pk", flat=True)[:size])
        if not keys:
            return
        yield keys
        last = keys[-1]


def _rewrite_batch(
    model: Any, field: str, keys: list[Any], current: str, progress: Progress, dry_run: bool
) -> None:
    label = f"{model._meta.label}.{field}"
    with database.atomic():
        for pk, value in (
            model._default_manager.select_for_update()
            .filter(pk__in=keys)
            .order_by("pk")
            .values_list("pk", field)
        ):
            progress.rows_scanned += 1
            before = sum(progress.by_key.values())
            new = rekey.rewrite_value(value, _rewriter(current, progress, dry_run, f"{label}#{pk}"))
            changed = sum(progress.by_key.values()) - before
            if changed and not dry_run:
                model._default_manager.filter(pk=pk).update(**{field: new})
                progress.rows_rewritten += 1
                progress.envelopes_rewritten += changed


def reencrypt(
    *,
    batch_size: int = 500,
    dry_run: bool = False,
    after: str | None = None,
    report: Callable[[str], None] = lambda line: None,
) -> Progress:
    """Rewrite (or, with ``dry_run``, count) payloads not under the current key."""
    current = current_key_id()
    if current is None:
        raise PayloadCodecError(
            "payload_key_unavailable",
            "no current encryption key: set PAYLOAD_CODECS with 'aes-gcm' and "
            "PAYLOAD_ENCRYPTION_KEY_ID",
        )
    progress = Progress()
    columns = list(payload_columns())
    labels = [f"{model._meta.label}.{field}" for model, fields in columns for field in fields]
    if after is not None and after not in labels:
        raise ValueError(f"--after {after!r} is not one of: {', '.join(labels)}")
    skipping = after is not None
    for model, fields in columns:
        for field in fields:
            label = f"{model._meta.label}.{field}"
            if skipping:
                skipping = label != after
                continue
            for keys in _batches(model, field, batch_size):
                _rewrite_batch(model, field, keys, current, progress, dry_run)
            report(
                f"{label}: done ({progress.envelopes_rewritten} envelopes rewritten so far"
                f"{', dry run' if dry_run else ''})"
            )
    return progress
