"""Instances and runs."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.db.models import F

from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    InstanceStatus,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.namespaces import instance_key
from durable_workflow.store import records, sql
from durable_workflow.store.records import InstanceRecord, RunRecord

_RUN_FIELDS = records.columns(RunRecord)


_RUNS = sql.Table(WorkflowRun)
_INSTANCES = sql.Table(WorkflowInstance)


_run_record = records.reader(RunRecord)
_instance_record = records.reader(InstanceRecord)


def reserve_instance(
    instance_id: str, workflow_type: str, *, namespace: str, now: dt.datetime
) -> InstanceRecord:
    """Create the instance row in ``reserved`` state unless it already exists."""
    row, _ = WorkflowInstance.objects.get_or_create(
        key=instance_key(namespace, instance_id),
        defaults={
            "namespace": namespace,
            "instance_id": instance_id,
            "workflow_type": workflow_type,
            "created_at": now,
            "updated_at": now,
        },
    )
    return _instance_record(row)


def lock_instance(instance_id: str, *, namespace: str) -> InstanceRecord | None:
    key = instance_key(namespace, instance_id)
    row = WorkflowInstance.objects.select_for_update().filter(key=key).first()
    return _instance_record(row) if row else None


def get_instance(instance_id: str, *, namespace: str) -> InstanceRecord | None:
    row = WorkflowInstance.objects.filter(key=instance_key(namespace, instance_id)).first()
    return _instance_record(row) if row else None


def create_run(
    *,
    namespace: str,
    instance_id: str,
    workflow_type: str,
    workflow_class: str,
    arguments: dict[str, Any],
    payload_codec: str,
    queue: str | None,
    connection: str | None,
    now: dt.datetime,
    extra: dict[str, Any],
) -> RunRecord:
    """A new run, made current on its instance."""
    key = instance_key(namespace, instance_id)
    instance = WorkflowInstance.objects.get(key=key)
    row = WorkflowRun.objects.create(
        namespace=namespace,
        instance_id=instance_id,
        run_number=instance.run_count + 1,
        workflow_type=workflow_type,
        workflow_class=workflow_class,
        arguments=arguments,
        payload_codec=payload_codec,
        queue=queue,
        connection=connection,
        started_at=now,
        last_progress_at=now,
        created_at=now,
        updated_at=now,
        **extra,
    )
    WorkflowInstance.objects.filter(key=key).update(
        current_run=row,
        run_count=F("run_count") + 1,
        status=InstanceStatus.PENDING,
        workflow_type=workflow_type,
        business_key=extra.get("business_key"),
        updated_at=now,
    )
    return _run_record(row)


def open_run_with_deduplication_id(deduplication_id: str, *, namespace: str) -> RunRecord | None:
    """The open run of the namespace holding a start de-duplication id, if any."""
    row = (
        WorkflowRun.objects.filter(namespace=namespace, deduplication_id=deduplication_id)
        .exclude(status__in=TERMINAL_RUN_STATUSES)
        .first()
    )
    return _run_record(row) if row else None


def lock_run(run_id: uuid.UUID | str) -> RunRecord | None:
    """Read a run under a row lock: the serialisation point for all progress."""
    locked: RunRecord | None = sql.together(WorkflowRun, [lock_statement(run_id)])[0]
    return locked


def lock_statement(
    run_id: uuid.UUID | str | sql.Statement[Any],
) -> sql.Statement[RunRecord | None]:
    """:func:`lock_run` as a statement for ``sql.together`` (outcome: the record or
    ``None``); ``run_id`` may be a subquery selecting it."""
    read = _RUNS.select_statement(_RUN_FIELDS, [_by_id(run_id)], for_update=True)
    return read.then(_first_record)


def workflow_task_sequence_statement(
    run_id: sql.Statement[Any],
) -> sql.Statement[list[list[Any]]]:
    """The last sequence the run's workflow tasks saw, as a subquery (``> SELECT``)."""
    return _RUNS.select_statement(["workflow_task_sequence"], [_by_id(run_id)])


def _by_id(run_id: uuid.UUID | str | sql.Statement[Any]) -> sql.Condition:
    return ("id", "IN SELECT", run_id) if isinstance(run_id, sql.Statement) else ("id", "=", run_id)


#: Columns a run keeps for life (left out of :func:`expected_statement`).
_FIXED = frozenset(
    {
        "id",
        "namespace",
        "instance_id",
        "run_number",
        "workflow_type",
        "workflow_class",
        "payload_codec",
        "arguments",
        "created_at",
        "parent_run_id",
        "parent_sequence",
    }
)


def expected_statement(run: RunRecord) -> sql.Statement[None]:
    """The run lock of :func:`lock_statement` for a run assumed to be exactly ``run``:
    the transaction fails unless its row holds these values (``sql.expect_rows``)."""
    where: list[sql.Condition] = [("id", "=", run.id)]
    for name in _RUN_FIELDS:
        if name not in _FIXED:
            value = getattr(run, name)
            where.append((name, "IS NULL", None) if value is None else (name, "=", value))
    return sql.expect_rows(_RUNS.select_statement(["id"], where, for_update=True), 1)


def _first_record(rows: list[list[Any]]) -> RunRecord | None:
    return RunRecord(**dict(zip(_RUN_FIELDS, rows[0], strict=True))) if rows else None


def get_run(run_id: uuid.UUID | str) -> RunRecord | None:
    rows = _RUNS.select(_RUN_FIELDS, [("id", "=", run_id)])
    return RunRecord(**dict(zip(_RUN_FIELDS, rows[0], strict=True))) if rows else None


def cancel_states(
    run_ids: list[uuid.UUID],
) -> dict[uuid.UUID, tuple[str, dt.datetime | None]]:
    """(status, cancel_requested_at) of each of ``run_ids`` that exists, in one query."""
    rows = WorkflowRun.objects.filter(id__in=run_ids).values_list(
        "id", "status", "cancel_requested_at"
    )
    return {run_id: (status, requested) for run_id, status, requested in rows}


def current_run(instance_id: str, *, namespace: str) -> RunRecord | None:
    row = (
        WorkflowRun.objects.filter(namespace=namespace, instance_id=instance_id)
        .order_by("-run_number")
        .first()
    )
    return _run_record(row) if row else None


def unarchived_run_ids(instance_id: str, *, namespace: str, besides: uuid.UUID) -> list[uuid.UUID]:
    """The instance's runs not archived yet, but ``besides``, oldest first."""
    return list(
        WorkflowRun.objects.filter(
            namespace=namespace, instance_id=instance_id, archived_at__isnull=True
        )
        .exclude(id=besides)
        .order_by("run_number")
        .values_list("id", flat=True)
    )


def save_run(run: RunRecord, *, now: dt.datetime) -> None:
    """Write the fields the executor changed, in one UPDATE."""
    if not run.dirty:
        return
    changes = {name: getattr(run, name) for name in sorted(run.dirty)}
    changes["updated_at"] = now
    _RUNS.update(changes, [("id", "=", run.id)], defer=True)
    if "status" in run.dirty and run.status in TERMINAL_RUN_STATUSES:
        # The instance mirrors its current run's status only when it closes;
        # flips between pending and waiting would cost a write per step.
        _INSTANCES.update(
            {"status": run.status, "updated_at": now},
            [
                ("key", "=", instance_key(run.namespace, run.instance_id)),
                ("current_run_id", "=", run.id),
            ],
            defer=True,
        )
    run.dirty.clear()


def continuation_fields(run_id: uuid.UUID) -> dict[str, Any]:
    """What a run hands to the run that continues it."""
    return dict(
        WorkflowRun.objects.filter(id=run_id)
        .values(
            "business_key",
            "labels",
            "memo",
            "search_attributes",
            "execution_timeout_seconds",
            "run_timeout_seconds",
            "execution_deadline_at",
            "compatibility",
            # The continuing run keeps its queue slot (and its place, had it one).
            "queue_slot",
            "priority",
        )
        .get()
    )


def runs_past_deadline(*, now: dt.datetime, limit: int) -> list[uuid.UUID]:
    """Open runs whose execution or run deadline has passed."""
    from django.db.models import Q

    return list(
        WorkflowRun.objects.exclude(status__in=TERMINAL_RUN_STATUSES)
        .filter(Q(execution_deadline_at__lte=now) | Q(run_deadline_at__lte=now))
        .values_list("id", flat=True)[:limit]
    )


def record_reset(run_id: uuid.UUID, *, reset_to: uuid.UUID, point: dict[str, Any]) -> None:
    """Point an old run at the run a reset of it started."""
    WorkflowRun.objects.filter(id=run_id).update(reset_to_run_id=reset_to, reset_point=point)


def lineage(run_id: uuid.UUID | str) -> dict[str, Any] | None:
    """A run's rewind lineage: ``reset_from_run_id``, ``reset_to_run_id``, ``reset_point``."""
    row = (
        WorkflowRun.objects.filter(id=run_id)
        .values("reset_from_run_id", "reset_to_run_id", "reset_point")
        .first()
    )
    return None if row is None else dict(row)
