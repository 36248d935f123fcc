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
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import QuerySet

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
HISTORY_CHUNK = 10_000


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
    instances = set(runs.values_list("namespace", "instance_id").distinct())
    keep = set(
        WorkflowRun.objects.filter(instance_id__in={i for _, i in instances})
        .exclude(id__in=ids)
        .values_list("namespace", "instance_id")
        .distinct()
    )
    counts["instances"] = len(instances - keep)
    return counts


def _delete_history(run_ids: list[uuid.UUID]) -> int:
    deleted = 0
    while True:
        chunk = list(
            HistoryEvent.objects.filter(run_id__in=run_ids).values_list("id", flat=True)[
                :HISTORY_CHUNK
            ]
        )
        if not chunk:
            return deleted
        deleted += HistoryEvent.objects.filter(id__in=chunk).delete()[0]


def delete_runs(run_ids: list[uuid.UUID]) -> Counter[str]:
    """Delete the runs and all their rows in one transaction; returns rows per kind."""
    deleted: Counter[str] = Counter()
    with database.atomic():
        instances = set(
            WorkflowRun.objects.filter(id__in=run_ids).values_list("namespace", "instance_id")
        )
        for name, qs in _dependents(run_ids):
            if name == "history_events":
                deleted[name] += _delete_history(run_ids)
            else:
                deleted[name] += qs.delete()[1].get(qs.model._meta.label, 0)
        ChildCall.objects.filter(child_run_id__in=run_ids).update(child_run=None)
        WorkflowRun.objects.filter(parent_run_id__in=run_ids).update(parent_run=None)
        WorkflowRun.objects.filter(continued_from_id__in=run_ids).update(continued_from=None)
        WorkflowInstance.objects.filter(current_run_id__in=run_ids).update(current_run=None)
        # The collector also cascades to any table added later that points at runs.
        _, per_model = WorkflowRun.objects.filter(id__in=run_ids).delete()
        deleted["runs"] += per_model.get(WorkflowRun._meta.label, 0)
        emptied = instances - set(
            WorkflowRun.objects.filter(instance_id__in={i for _, i in instances}).values_list(
                "namespace", "instance_id"
            )
        )
        if emptied:
            deleted["instances"] += _delete_instances(emptied)
    return deleted


def _delete_instances(emptied: set[tuple[str, str]]) -> int:
    """Delete instances left without runs, and their rows that name no run."""
    by_namespace: dict[str, set[str]] = {}
    for namespace, instance_id in emptied:
        by_namespace.setdefault(namespace, set()).add(instance_id)
    for namespace, ids in by_namespace.items():
        WorkflowCommand.objects.filter(namespace=namespace, instance_id__in=ids).delete()
        WorkflowMessage.objects.filter(namespace=namespace, target_instance_id__in=ids).delete()
    # Signal and update rows carry no namespace: those of an id that still names an
    # instance in another namespace are kept.
    ids = {instance_id for _, instance_id in emptied}
    alive = set(
        WorkflowInstance.objects.filter(instance_id__in=ids)
        .exclude(key__in=[instance_key(*pair) for pair in emptied])
        .values_list("instance_id", flat=True)
    )
    for model in (WorkflowSignal, WorkflowUpdate):
        model.objects.filter(instance_id__in=ids - alive, run_id__isnull=True).delete()
    keys = [instance_key(*pair) for pair in emptied]
    deleted = WorkflowInstance.objects.filter(key__in=keys).delete()[1]
    return deleted.get(WorkflowInstance._meta.label, 0)


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
    skipped: set[uuid.UUID] = set()
    while report.pruned_runs + len(skipped) < total:
        want = min(batch_size, total - report.pruned_runs - len(skipped))
        batch = list(runs.exclude(id__in=skipped)[:want])
        if not batch:
            break
        ids = []
        for run in batch:
            if export_dir is not None:
                try:
                    export_run(run, export_dir)
                    report.exported += 1
                except Exception as exc:
                    skipped.add(run.id)
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
