"""Retention: delete closed runs older than a cutoff with every row that hangs off them
(or, ``archived_only``, only runs archived before the cutoff).

Rows go in dependency order, one batch of runs per transaction: attempts,
tasks, activity executions, timers, history (in chunks), signals, updates,
failures, child calls, search attributes, commands, then the runs, then instances left without
runs. References from rows that stay (a parent's child call, a continued
run, an instance's current run) are cleared, never followed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pathlib
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.db.models import Field, Model, Q, QuerySet

from durable_workflow import clock
from durable_workflow.ids import instance_file_name
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    HistoryEvent,
    SearchAttribute,
    Task,
    Timer,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowInstance,
    WorkflowMessage,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)
from durable_workflow.namespaces import instance_key
from durable_workflow.operations.export import build_bundle
from durable_workflow.store import database

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 86400}


def parse_age(text: str) -> dt.timedelta:
    """``"90d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"``; a bare number means days."""
    match = _AGE.match(text)
    if not match:
        raise ValueError(f"not an age: {text!r} (use e.g. 90d, 12h, 30m, 2w)")
    return dt.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def candidates(
    cutoff: dt.datetime, *, statuses: Sequence[str] | None = None, archived_only: bool = False
) -> QuerySet[WorkflowRun]:
    """Closed runs whose ``closed_at`` is at or before ``cutoff``, oldest first; with
    ``archived_only``, archived runs whose ``archived_at`` is at or before it instead."""
    allowed = set(statuses or TERMINAL_RUN_STATUSES) & set(TERMINAL_RUN_STATUSES)
    runs = WorkflowRun.objects.filter(status__in=sorted(allowed), closed_at__isnull=False)
    if archived_only:
        return runs.filter(archived_at__isnull=False, archived_at__lte=cutoff).order_by(
            "archived_at", "id"
        )
    return runs.filter(closed_at__lte=cutoff).order_by("closed_at", "id")


def _dependents(run_ids: Any) -> list[tuple[str, QuerySet[Any]]]:
    """Every row owned by the runs, in the order it must be deleted."""
    return [
        ("activity_attempts", ActivityAttempt.objects.filter(execution__run_id__in=run_ids)),
        ("tasks", Task.objects.filter(run_id__in=run_ids)),
        ("activity_executions", ActivityExecution.objects.filter(run_id__in=run_ids)),
        ("timers", Timer.objects.filter(run_id__in=run_ids)),
        ("history_events", HistoryEvent.objects.filter(run_id__in=run_ids)),
        ("signals", WorkflowSignal.objects.filter(run_id__in=run_ids)),
        ("updates", WorkflowUpdate.objects.filter(run_id__in=run_ids)),
        ("failures", WorkflowFailure.objects.filter(run_id__in=run_ids)),
        ("child_calls", ChildCall.objects.filter(parent_run_id__in=run_ids)),
        ("search_attributes", SearchAttribute.objects.filter(run_id__in=run_ids)),
        ("commands", WorkflowCommand.objects.filter(run_id__in=run_ids)),
    ]


def count_rows(runs: QuerySet[WorkflowRun]) -> dict[str, int]:
    """How many rows pruning ``runs`` would delete, per kind (for ``--dry-run``)."""
    ids = runs.values("id")
    counts = {name: qs.count() for name, qs in _dependents(ids)}
    counts["runs"] = runs.count()
    # order_by(): an ordering (the candidates' closed_at and id, the model's default
    # created_at) would join the DISTINCT and send back each run, not each instance.
    instances = set(runs.order_by().values_list("namespace", "instance_id").distinct())
    keep = set(
        WorkflowRun.objects.filter(instance_id__in={i for _, i in instances})
        .exclude(id__in=ids)
        .order_by()
        .values_list("namespace", "instance_id")
        .distinct()
    )
    counts["instances"] = len(instances - keep)
    return counts


#: Values per statement: a batch of runs with long histories owns many thousands of rows.
ID_CHUNK = 10_000

#: Every foreign key that names a run, and what pruning does with its rows: the rows a run
#: owns go with it (in this order); rows that stay have the reference cleared.
#: ``tests/integration/test_prune.py`` checks that no foreign key to a run is missing.
OWNED_BY_RUN: tuple[tuple[type[Model], str], ...] = (
    (Task, "run"),
    (HistoryEvent, "run"),
    (WorkflowSignal, "run"),
    (WorkflowUpdate, "run"),
    (WorkflowFailure, "run"),
    (ChildCall, "parent_run"),
    (SearchAttribute, "run"),
)
CLEARED_FOR_RUN: tuple[tuple[type[Model], str], ...] = (
    (ChildCall, "child_run"),
    (WorkflowRun, "parent_run"),
    (WorkflowRun, "continued_from"),
    (WorkflowRun, "reset_from_run"),
    (WorkflowRun, "reset_to_run"),
    (WorkflowInstance, "current_run"),
    (WorkflowMessage, "target_run"),
)
#: Owned rows that other rows point at: their ids are read first, then what points at
#: them goes, then they do.
REFERENCED: tuple[tuple[type[Model], str, tuple[tuple[type[Model], str], ...]], ...] = (
    (
        ActivityExecution,
        "activity_executions",
        ((ActivityAttempt, "execution"), (Task, "activity_execution")),
    ),
    (Timer, "timers", ((Task, "timer"),)),
    (WorkflowCommand, "commands", ((WorkflowSignal, "command"), (WorkflowUpdate, "command"))),
)
_NAMES: dict[type[Model], str] = {
    ActivityAttempt: "activity_attempts",
    Task: "tasks",
    HistoryEvent: "history_events",
    WorkflowSignal: "signals",
    WorkflowUpdate: "updates",
    WorkflowFailure: "failures",
    ChildCall: "child_calls",
    SearchAttribute: "search_attributes",
}


def _matching(field: Field[Any, Any], values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
    """``(condition, params)`` selecting the rows whose ``field`` is one of ``values``:
    on PostgreSQL ``= ANY(%s)`` with the values as one array (the driver reads one
    placeholder instead of splitting a statement of thousands); elsewhere ``IN (%s, ...)``,
    in chunks the backend accepts."""
    connection = database.connection()
    column = _quoted(field)
    params = [field.get_db_prep_value(value, connection) for value in values]
    if connection.vendor == "postgresql":
        yield f"{column} = ANY(%s)", [params]
        return
    size = min(ID_CHUNK, connection.features.max_query_params or ID_CHUNK)
    for start in range(0, len(params), size):
        chunk = params[start : start + size]
        yield f"{column} IN ({', '.join(['%s'] * len(chunk))})", chunk


def _quoted(field: Field[Any, Any]) -> str:
    assert field.column is not None
    return str(database.connection().ops.quote_name(field.column))


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _execute(model: type[Model], field: str, values: Sequence[Any], sql: str) -> Iterator[Any]:
    """Run ``sql`` (``{table}`` and ``{where}`` filled in) for each chunk of ``values``;
    yields the cursor after each."""
    connection = database.connection()
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        for where, params in _matching(_field(model, field), values):
            cursor.execute(sql.format(table=table, where=where), params)
            yield cursor


def _ids(model: type[Model], field: str, values: Sequence[Any]) -> list[Any]:
    """Primary keys of ``model``'s rows whose ``field`` is one of ``values``."""
    if not values:
        return []
    sql = f"SELECT {_quoted(_field(model, 'pk'))} FROM {{table}} WHERE {{where}}"
    return [row[0] for cursor in _execute(model, field, values, sql) for row in cursor.fetchall()]


def _delete(model: type[Model], field: str, values: Sequence[Any]) -> int:
    """``DELETE FROM <model> WHERE <field> IN (values)``; the number of rows deleted.

    Not ``QuerySet.delete()``: for a model that other rows point at, Django's collector
    reads every row back first, then deletes them a hundred at a time (95 statements
    for a batch of 500 runs); here whatever points at them is gone already.
    """
    if not values:
        return 0
    sql = "DELETE FROM {table} WHERE {where}"
    return sum(cursor.rowcount for cursor in _execute(model, field, values, sql))


def _clear(model: type[Model], field: str, values: Sequence[Any]) -> None:
    """``UPDATE <model> SET <field> = NULL WHERE <field> IN (values)``."""
    sql = f"UPDATE {{table}} SET {_quoted(_field(model, field))} = NULL WHERE {{where}}"
    sum(cursor.rowcount for cursor in _execute(model, field, values, sql))


def delete_runs(run_ids: Sequence[uuid.UUID]) -> Counter[str]:
    """Delete the runs and all their rows in one transaction; returns rows per kind.

    A fixed number of statements per batch, each a lookup by an indexed key: what a
    batch costs does not grow with the tables (docs/performance.md, prune).
    """
    run_ids = list(run_ids)
    deleted: Counter[str] = Counter()
    with database.atomic():
        instances = set(
            WorkflowRun.objects.filter(id__in=run_ids)
            .order_by()
            .values_list("namespace", "instance_id")
        )
        emptied = instances - _with_other_runs(instances, set(run_ids))
        for model, name, pointing in REFERENCED:
            ids = _ids(model, "run", run_ids)
            for pointer, field in pointing:
                deleted[_NAMES[pointer]] += _delete(pointer, field, ids)
            deleted[name] += _delete(model, "pk", ids)
        for model, field in OWNED_BY_RUN:
            deleted[_NAMES[model]] += _delete(model, field, run_ids)
        if emptied:  # first: an instance that goes needs no current run cleared
            deleted["instances"] += _delete_instances(emptied)
        for model, field in CLEARED_FOR_RUN:
            _clear(model, field, run_ids)
        deleted["runs"] += _delete(WorkflowRun, "pk", run_ids)
    return deleted


def _by_namespace(pairs: set[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for namespace, instance_id in sorted(pairs):
        grouped.setdefault(namespace, []).append(instance_id)
    return grouped


def _with_other_runs(
    instances: set[tuple[str, str]], run_ids: set[uuid.UUID]
) -> set[tuple[str, str]]:
    """The instances that have a run besides ``run_ids`` (one statement, on the
    (namespace, instance_id, run_number) index)."""
    which = Q()
    for namespace, ids in _by_namespace(instances).items():
        which |= Q(namespace=namespace, instance_id__in=ids)
    runs = WorkflowRun.objects.filter(which).order_by()
    return {
        (namespace, instance_id)
        for namespace, instance_id, run_id in runs.values_list("namespace", "instance_id", "id")
        if run_id not in run_ids
    }


def _delete_instances(emptied: set[tuple[str, str]]) -> int:
    """Delete instances left without runs, and their rows that name no run."""
    for namespace, ids in _by_namespace(emptied).items():
        commands = WorkflowCommand.objects.filter(namespace=namespace, instance_id__in=ids)
        command_ids = list(commands.order_by().values_list("id", flat=True))
        for model in (WorkflowSignal, WorkflowUpdate):
            _delete(model, "command", command_ids)
        _delete(WorkflowCommand, "pk", command_ids)
        WorkflowMessage.objects.filter(namespace=namespace, target_instance_id__in=ids).delete()
    # Signal and update rows carry no namespace: those of an id that still names an
    # instance in another namespace are kept. Few rows name no run, so the instances
    # (not indexed by id alone) are only asked about theirs.
    instance_ids = {instance_id for _, instance_id in emptied}
    keys = [instance_key(*pair) for pair in emptied]
    for model in (WorkflowSignal, WorkflowUpdate):
        loose = model._default_manager.filter(instance_id__in=instance_ids, run_id__isnull=True)
        loose_ids = set(loose.order_by().values_list("instance_id", flat=True))
        if loose_ids:
            alive = set(
                WorkflowInstance.objects.filter(instance_id__in=loose_ids)
                .exclude(key__in=keys)
                .order_by()
                .values_list("instance_id", flat=True)
            )
            loose.filter(instance_id__in=loose_ids - alive).delete()
    return _delete(WorkflowInstance, "pk", keys)


@dataclasses.dataclass
class PruneReport:
    cutoff: str
    dry_run: bool
    total_runs: int
    archived_only: bool = False
    pruned_runs: int = 0
    exported: int = 0
    skipped: list[dict[str, str]] = dataclasses.field(default_factory=list)
    rows: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def export_run(run: WorkflowRun, directory: pathlib.Path) -> pathlib.Path:
    """Write the run's bundle to ``<directory>/<instance file name>/run-<n>-<run id>.json``.

    The instance id goes through ``instance_file_name`` (``.`` and ``..`` are
    valid ids); a directory that resolves elsewhere (a symlink) is refused.
    """
    bundle = build_bundle(run.instance_id, run_id=str(run.id), namespace=run.namespace)
    folder = directory / instance_file_name(run.instance_id)
    folder.mkdir(parents=True, exist_ok=True)
    if not folder.resolve().is_relative_to(directory.resolve()):
        raise ValueError(f"{folder} resolves outside {directory}")
    target = folder / f"run-{run.run_number}-{run.id}.json"
    target.write_text(json.dumps(bundle, ensure_ascii=False), encoding="utf-8")
    return target


def _next_batch(
    runs: QuerySet[WorkflowRun],
    order: str,
    after: tuple[dt.datetime, uuid.UUID] | None,
    size: int,
) -> list[WorkflowRun]:
    """The next ``size`` candidates after ``after``, the last batch's (``order``, id).

    Each batch starts where the last one ended on the index of ``order``
    (``dw_run_closed``, ``dw_run_archived``) instead of walking again past the entries of
    runs deleted (dead until vacuumed) or kept (their export failed).
    """
    if after is not None:
        at, last = after
        runs = runs.filter(**{f"{order}__gte": at}).exclude(**{order: at, "id__lte": last})
    return list(runs.only("id", "namespace", "instance_id", "run_number", order)[:size])


def prune(
    *,
    older_than: dt.timedelta,
    statuses: Sequence[str] | None = None,
    batch_size: int = 500,
    dry_run: bool = False,
    export_dir: pathlib.Path | None = None,
    limit: int | None = None,
    progress: Callable[[PruneReport], None] | None = None,
    now: dt.datetime | None = None,
    archived_only: bool = False,
) -> PruneReport:
    cutoff = (now or clock.now()) - older_than
    runs = candidates(cutoff, statuses=statuses, archived_only=archived_only)
    total = runs.count() if limit is None else min(runs.count(), limit)
    report = PruneReport(
        cutoff=cutoff.isoformat(), dry_run=dry_run, total_runs=total, archived_only=archived_only
    )
    if dry_run:
        report.rows = count_rows(
            runs.filter(id__in=list(runs.values_list("id", flat=True)[:total]))
        )
        return report
    rows: Counter[str] = Counter()
    order = "archived_at" if archived_only else "closed_at"
    after: tuple[dt.datetime, uuid.UUID] | None = None
    while report.pruned_runs + len(report.skipped) < total:
        want = min(batch_size, total - report.pruned_runs - len(report.skipped))
        batch = _next_batch(runs, order, after, want)
        if not batch:
            break
        after = (getattr(batch[-1], order), batch[-1].id)
        ids = []
        for run in batch:
            if export_dir is not None:
                try:
                    export_run(run, export_dir)
                    report.exported += 1
                except Exception as exc:
                    report.skipped.append(
                        {"run_id": str(run.id), "reason": f"export failed: {exc}"}
                    )
                    continue
            ids.append(run.id)
        if ids:
            rows.update(delete_runs(ids))
            report.pruned_runs += len(ids)
        report.rows = dict(rows)
        if progress is not None:
            progress(report)
    return report
