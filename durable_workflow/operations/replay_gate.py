"""The deploy gate: replay recent runs of each workflow type against the code about to ship.

``select_runs`` picks, for each workflow type (every type that has runs, or the
ones asked for), every open run and the ``recent`` most recently closed ones:
open runs are the ones the new code will have to continue, closed ones are the
freshest record of what the current code does. ``replay_runs`` replays each in
memory (``operations.replay``: nothing is written), and ``summarize`` counts the
outcomes per type for the table ``workflow_replay --recent`` prints.
``export_runs`` writes the same selection as bundles, for a gate that runs where
the database is out of reach.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

from durable_workflow.models import TERMINAL_RUN_STATUSES, WorkflowRun
from durable_workflow.operations.replay import ReplayResult, replay_instance

#: Open and closed runs are read in pages of this many rows.
PAGE = 500


def add_selection_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--recent N`` and ``--type T``: the selection of :func:`select_runs`, as the
    commands that act on it (``workflow_replay``, ``workflow_history_export``) take it."""
    parser.add_argument(
        "--recent",
        type=int,
        default=None,
        metavar="N",
        help=f"{verb} every open run and the N most recently closed runs of each type",
    )
    parser.add_argument(
        "--type",
        action="append",
        default=[],
        dest="types",
        metavar="TYPE",
        help="with --recent: only this workflow type (repeatable)",
    )


def select_runs(recent: int, types: Sequence[str] = ()) -> list[WorkflowRun]:
    """Every open run and the ``recent`` last closed runs of each type, oldest first."""
    if recent < 0:
        raise ValueError("recent must be >= 0")
    base = WorkflowRun.objects.only("id", "instance_id", "run_number", "workflow_type", "status")
    if types:
        base = base.filter(workflow_type__in=list(types))
    names = sorted(types) or sorted(
        base.order_by().values_list("workflow_type", flat=True).distinct()
    )
    chosen: list[WorkflowRun] = []
    for name in names:
        of_type = base.filter(workflow_type=name)
        chosen += of_type.exclude(status__in=TERMINAL_RUN_STATUSES).order_by("created_at", "id")
        if recent:
            closed = of_type.filter(status__in=TERMINAL_RUN_STATUSES)
            chosen += reversed(closed.order_by("-closed_at", "-id")[:recent])
    return chosen


def replay_runs(runs: Iterable[WorkflowRun]) -> list[ReplayResult]:
    """Replay each run in memory against the code loaded now."""
    return [
        replay_instance(run.instance_id, run_id=str(run.id), namespace=run.namespace)
        for run in runs
    ]


@dataclasses.dataclass
class TypeSummary:
    workflow_type: str
    replayed: int = 0
    ok: int = 0
    nondeterministic: int = 0
    error: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summarize(results: Iterable[ReplayResult]) -> list[TypeSummary]:
    """Outcomes counted per workflow type, in type order."""
    rows: dict[str, TypeSummary] = {}
    for result in results:
        name = result.workflow_type or "<unknown>"
        row = rows.setdefault(name, TypeSummary(name))
        row.replayed += 1
        setattr(row, result.status, getattr(row, result.status) + 1)
    return [rows[name] for name in sorted(rows)]


def table(rows: Sequence[TypeSummary]) -> list[str]:
    """The summary as aligned text lines, with a total."""
    width = max([len("workflow type"), *(len(r.workflow_type) for r in rows)])
    total = TypeSummary("total")
    for row in rows:
        for field in ("replayed", "ok", "nondeterministic", "error"):
            setattr(total, field, getattr(total, field) + getattr(row, field))
    lines = [f"{'workflow type':<{width}}  replayed      ok  diverged  errors"]
    for row in [*rows, total]:
        lines.append(
            f"{row.workflow_type:<{width}}  {row.replayed:>8}  {row.ok:>6}  "
            f"{row.nondeterministic:>8}  {row.error:>6}"
        )
    return lines


def export_runs(runs: Iterable[WorkflowRun], directory: pathlib.Path) -> list[pathlib.Path]:
    """Write each run's bundle under ``directory`` (the layout ``workflow_prune`` uses)."""
    from durable_workflow.operations.prune import export_run

    directory.mkdir(parents=True, exist_ok=True)
    return [export_run(run, directory) for run in runs]
