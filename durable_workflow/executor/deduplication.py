"""De-duplication ids on starts: at most one open run holds a given id.

The id is ``StartOptions.deduplication_id`` (DBOS's queue ``deduplication_id``),
independent of the instance id. A partial unique index on open runs decides
between concurrent starts; the loser is rejected with outcome ``rejected_duplicate``
and reason ``deduplication_id_in_use``; its instance stays ``reserved`` and may be
started once the holder closes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError

from durable_workflow.models import CommandStatus, CommandType
from durable_workflow.options import StartOptions
from durable_workflow.store import commands, database, runs
from durable_workflow.store.records import CommandRecord, RunRecord

REASON = "deduplication_id_in_use"


def holder(deduplication_id: str | None, *, namespace: str) -> RunRecord | None:
    """The namespace's open run holding ``deduplication_id`` (``None``: free or unset)."""
    if deduplication_id is None:
        return None
    return runs.open_run_with_deduplication_id(deduplication_id, namespace=namespace)


def create_unless_held(deduplication_id: str | None, **run: Any) -> RunRecord | None:
    """``runs.create_run(**run)``, or ``None`` when a concurrent start took the id first."""
    if deduplication_id is None:
        return runs.create_run(**run)
    try:
        # A savepoint: the loser's insert fails without aborting the caller's transaction.
        with database.atomic():
            return runs.create_run(**run)
    except IntegrityError:
        if holder(deduplication_id, namespace=run["namespace"]) is None:
            raise
        return None


def reject(
    instance_id: str,
    options: StartOptions,
    source: str,
    metadata: dict[str, Any] | None,
    held_by: RunRecord | None,
    *,
    namespace: str,
    now: dt.datetime,
) -> tuple[CommandRecord, RunRecord | None]:
    """Record the rejected start; the instance stays ``reserved``, as ``make()`` left it."""
    held_by = held_by or holder(options.deduplication_id, namespace=namespace)
    command = commands.record_command(
        namespace=namespace,
        instance_id=instance_id,
        run_id=None,
        command_type=CommandType.START,
        status=CommandStatus.REJECTED,
        outcome="rejected_duplicate",
        rejection_reason=REASON,
        source=source,
        payload=metadata,
        metadata={
            "deduplication_id": options.deduplication_id,
            "holder_instance_id": held_by.instance_id if held_by else None,
            "holder_run_id": str(held_by.id) if held_by else None,
        },
        now=now,
    )
    return command, held_by
