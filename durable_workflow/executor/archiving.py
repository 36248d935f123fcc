"""Archive: mark closed runs so they leave the default run lists. Nothing is deleted.

Aimed at an instance, the command archives every closed run of it that is not
archived yet (the runs of a continue-as-new chain go together), once its newest
run has closed. Aimed at one run (``run_id``), it archives that run alone, any
closed run of the instance, the newest or not. An open run is refused
(``rejected_run_not_closed``); runs already archived are accepted with
``archive_not_needed`` and nothing is written but the command.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from durable_workflow import clock, namespaces
from durable_workflow.engine.events import EventType
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.executor import lifecycle
from durable_workflow.executor.closing import CloseOutcome, repeated_close
from durable_workflow.executor.common import retry_transaction
from durable_workflow.executor.intake import (
    check_request_id,
    not_found_message,
    repeated_request,
)
from durable_workflow.models import TERMINAL_RUN_STATUSES, CommandStatus, CommandType
from durable_workflow.store import commands, database, runs
from durable_workflow.store.records import RunRecord
from durable_workflow.text import check_reason

ARCHIVED = "archived"
ARCHIVE_NOT_NEEDED = "archive_not_needed"
REJECTED_RUN_NOT_CLOSED = ("rejected_run_not_closed", "run_not_closed")


@retry_transaction
def request_archive(
    instance_id: str,
    *,
    run_id: str | uuid.UUID | None = None,
    reason: str | None = None,
    source: str = "client",
    request_id: str | None = None,
    namespace: str | None = None,
) -> CloseOutcome:
    """Archive the instance's closed runs (or the one run ``run_id``).

    The accepted command's ``metadata["archived_run_ids"]`` lists the runs it
    archived; each of them has ``archived_at`` set and a ``WorkflowArchived``
    event after its closing event.
    """
    check_reason(reason)
    check_request_id(request_id)
    space = namespaces.resolve(namespace)
    now = clock.now()
    with database.atomic():
        if runs.get_instance(instance_id, namespace=space) is None:
            raise WorkflowNotFoundError(not_found_message(instance_id, space))
        prior = repeated_request(instance_id, CommandType.ARCHIVE, request_id, namespace=space)
        if prior is not None:  # the same request again: its first answer, nothing new
            return repeated_close(prior)
        targets, rejection = _lock_targets(instance_id, run_id, namespace=space)
        subject = targets[-1] if targets else None
        todo = [run for run in targets if run.archived_at is None] if rejection is None else []
        if rejection is not None:
            status, (outcome, why) = CommandStatus.REJECTED, rejection
        else:
            status, outcome, why = (
                CommandStatus.ACCEPTED,
                ARCHIVED if todo else ARCHIVE_NOT_NEEDED,
                None,
            )
        done: dict[str, Any] = {"archived_run_ids": [str(run.id) for run in todo]} if todo else {}
        command = commands.record_command(
            namespace=space,
            instance_id=instance_id,
            run_id=subject.id if subject else None,
            command_type=CommandType.ARCHIVE,
            status=status,
            outcome=outcome,
            rejection_reason=why,
            source=source,
            reason=reason or "",
            payload={} if request_id is None else {"request_id": request_id},
            metadata=done,
            now=now,
        )
        for run in todo:
            _archive(run, command.id, reason, now=now)
    return CloseOutcome(
        accepted=status == CommandStatus.ACCEPTED,
        outcome=outcome,
        command_id=command.id,
        instance_id=instance_id,
        run_id=subject.id if subject else None,
        rejection_reason=why,
        metadata=done,
        reason=reason,
    )


def _lock_targets(
    instance_id: str, run_id: str | uuid.UUID | None, *, namespace: str
) -> tuple[list[RunRecord], tuple[str, str] | None]:
    """The runs to archive, locked, oldest first, or why not (outcome, reason)."""
    if run_id is not None:
        try:
            run = runs.lock_run(uuid.UUID(str(run_id)))
        except ValueError:
            run = None
        if run is None or (run.namespace, run.instance_id) != (namespace, instance_id):
            raise WorkflowNotFoundError(f"no run {run_id!s} of workflow instance {instance_id!r}")
        if run.status not in TERMINAL_RUN_STATUSES:
            return [run], REJECTED_RUN_NOT_CLOSED
        return [run], None
    current = runs.current_run(instance_id, namespace=namespace)
    if current is None:
        return [], ("rejected_not_started", "instance_not_started")
    newest = runs.lock_run(current.id)
    assert newest is not None
    if newest.status not in TERMINAL_RUN_STATUSES:
        return [newest], REJECTED_RUN_NOT_CLOSED
    older = runs.unarchived_run_ids(instance_id, namespace=namespace, besides=newest.id)
    locked = [runs.lock_run(pk) for pk in older]
    return [run for run in locked if run is not None] + [newest], None


def _archive(
    run: RunRecord, command_id: uuid.UUID, reason: str | None, *, now: dt.datetime
) -> None:
    lifecycle.append(
        run,
        [(EventType.WORKFLOW_ARCHIVED, {"command_id": str(command_id), "reason": reason})],
        now=now,
    )
    run.set(archived_at=now)
    runs.save_run(run, now=now)
