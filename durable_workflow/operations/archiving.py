"""Archiving many runs: select closed runs by type, status and age, preview, archive.

Each run goes through the same command as ``WorkflowStub.archive()``
(``executor.archiving.request_archive``), one transaction per run, so every run
gets its ``WorkflowArchived`` event and an ``archive`` command row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import Q, QuerySet

from durable_workflow import namespaces
from durable_workflow.exceptions import WorkflowNotFoundError
from durable_workflow.executor.archiving import request_archive
from durable_workflow.models import TERMINAL_RUN_STATUSES, WorkflowRun


def candidates(
    *,
    closed_before: dt.datetime | None = None,
    workflow_type: str | None = None,
    statuses: Sequence[str] | None = None,
) -> QuerySet[WorkflowRun]:
    """Closed runs not archived yet, matching every filter given, oldest closed first."""
    allowed = set(statuses or TERMINAL_RUN_STATUSES) & set(TERMINAL_RUN_STATUSES)
    runs = WorkflowRun.objects.filter(
        status__in=sorted(allowed), archived_at__isnull=True, closed_at__isnull=False
    )
    if closed_before is not None:
        runs = runs.filter(closed_at__lte=closed_before)
    if workflow_type:
        runs = runs.filter(workflow_type=workflow_type)
    return runs.order_by("closed_at", "id")


def preview(
    instance_id: str, run_id: uuid.UUID | None = None, *, namespace: str | None = None
) -> tuple[bool, str, str | None]:
    """What archiving would answer, read without writing: (accepted, outcome, reason)."""
    space = namespaces.resolve(namespace)
    rows = WorkflowRun.objects.filter(namespace=space, instance_id=instance_id)
    if run_id is not None:
        rows = rows.filter(id=run_id)
    newest = rows.order_by("-run_number").values_list("status", flat=True).first()
    if newest is None:
        return False, "not_found", "run_not_found" if run_id else "instance_not_found"
    if newest not in TERMINAL_RUN_STATUSES:
        return False, "rejected_run_not_closed", "run_not_closed"
    if not rows.filter(archived_at__isnull=True).exists():
        return True, "archive_not_needed", None
    return True, "would_archive", None


@dataclasses.dataclass
class ArchiveReport:
    dry_run: bool
    total_runs: int = 0
    #: Outcome (``archived``, ``archive_not_needed``, ``would_archive``, a rejection)
    #: -> how many runs or instances got it.
    outcomes: dict[str, int] = dataclasses.field(default_factory=dict)
    rejected: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def done(self) -> int:
        return sum(self.outcomes.values())

    def count(
        self, outcome: str, target: str, run_id: Any = None, reason: str | None = None
    ) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if reason is not None:
            entry = {"instance_id": target, "outcome": outcome, "reason": reason}
            self.rejected.append({**entry, "run_id": str(run_id)} if run_id else entry)


def archive_targets(
    targets: Sequence[tuple[str, uuid.UUID | None, str]],
    *,
    reason: str | None,
    dry_run: bool = False,
    source: str = "cli",
    request_id: str | None = None,
) -> ArchiveReport:
    """Archive each named instance (all its closed runs) or run:
    ``(instance, run or None, namespace)``. With ``request_id``, running the same
    archive again answers each target from its first command."""
    report = ArchiveReport(dry_run=dry_run, total_runs=len(targets))
    for instance_id, run_id, namespace in targets:
        if dry_run:
            _, outcome, why = preview(instance_id, run_id, namespace=namespace)
            report.count(outcome, instance_id, run_id, why)
            continue
        try:
            done = request_archive(
                instance_id,
                run_id=run_id,
                reason=reason,
                source=source,
                namespace=namespace,
                request_id=_per_target(request_id, run_id),
            )
        except WorkflowNotFoundError:
            report.count("not_found", instance_id, run_id, "not_found")
            continue
        report.count(done.outcome, instance_id, run_id, done.rejection_reason)
    return report


def _per_target(request_id: str | None, run_id: uuid.UUID | None) -> str | None:
    """One request id per archived run: two runs of an instance are two requests."""
    if request_id is None or run_id is None:
        return request_id
    return f"{request_id}:{run_id}"


def archive_selected(
    runs: QuerySet[WorkflowRun],
    *,
    reason: str | None,
    dry_run: bool = False,
    limit: int | None = None,
    batch_size: int = 500,
    progress: Callable[[ArchiveReport], None] | None = None,
    source: str = "cli",
    request_id: str | None = None,
) -> ArchiveReport:
    """Archive the selected runs one by one, oldest closed first (at most ``limit``)."""
    total = runs.count() if limit is None else min(runs.count(), limit)
    report = ArchiveReport(dry_run=dry_run, total_runs=total)
    if dry_run:
        report.outcomes = {"would_archive": total} if total else {}
        return report
    done_count, after = 0, None
    while done_count < total:
        page = (
            runs
            if after is None
            else runs.filter(Q(closed_at__gt=after[0]) | Q(closed_at=after[0], id__gt=after[1]))
        )
        want = min(batch_size, total - done_count)
        batch = list(page.values_list("id", "namespace", "instance_id", "closed_at")[:want])
        if not batch:
            break
        for run_id, space, instance_id, closed_at in batch:
            done = request_archive(
                instance_id,
                run_id=run_id,
                reason=reason,
                source=source,
                namespace=space,
                request_id=_per_target(request_id, run_id),
            )
            report.count(done.outcome, instance_id, run_id, done.rejection_reason)
            after = (closed_at, run_id)
        done_count += len(batch)
        if progress is not None:
            progress(report)
    return report
