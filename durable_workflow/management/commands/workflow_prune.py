"""``manage.py workflow_prune``: delete closed runs past their retention, in batches."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.logs import get_logger
from durable_workflow.models import TERMINAL_RUN_STATUSES
from durable_workflow.operations.prune import PruneReport, parse_age, prune

logger = get_logger("durable_workflow")
_BAR = 30


class Command(BaseCommand):
    help = (
        "Delete closed (completed, failed, cancelled, terminated) runs that closed before "
        "--older-than, with their history, tasks, activities, timers, signals, updates, "
        "failures and commands; instances left without runs go too."
    )
    #: The report of the last batch that committed (what an interrupt reports).
    _report: PruneReport | None = None
    _quiet = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            metavar="AGE",
            help="retention: prune runs closed at least this long ago (90d, 12h, 30m, 2w)",
        )
        parser.add_argument(
            "--status",
            action="append",
            choices=sorted(TERMINAL_RUN_STATUSES),
            help="only runs with this status (repeatable; default: every closed status)",
        )
        parser.add_argument(
            "--archived-only",
            action="store_true",
            help="only archived runs, archived at least --older-than ago (what the spec asks)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go, delete nothing"
        )
        parser.add_argument("--batch-size", type=int, default=500, help="runs per transaction")
        parser.add_argument("--limit", type=int, default=None, help="prune at most this many runs")
        parser.add_argument(
            "--export-dir",
            default=None,
            metavar="DIR",
            help="write each run's history export bundle here before deleting it",
        )
        parser.add_argument("--json", action="store_true", help="print the final report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            age = parse_age(options["older_than"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        export_dir = pathlib.Path(options["export_dir"]) if options["export_dir"] else None
        quiet = options["json"]
        self._quiet, self._report = quiet, None
        try:
            report = prune(
                older_than=age,
                statuses=options["status"],
                batch_size=options["batch_size"],
                dry_run=options["dry_run"],
                export_dir=export_dir,
                limit=options["limit"],
                progress=self._progress,
                archived_only=options["archived_only"],
            )
        except KeyboardInterrupt:
            raise self._interrupted() from None
        logger.info(
            "workflow_prune: %s of %s runs pruned (dry run: %s)",
            report.pruned_runs,
            report.total_runs,
            report.dry_run,
            extra={"prune": report.as_dict()},
        )
        if quiet:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self._summary(report)
        if report.skipped:
            raise CommandError(f"{len(report.skipped)} run(s) were kept: export failed")

    def _interrupted(self) -> CommandError:
        """Ctrl-C: each batch is its own transaction, so the batches that committed stay
        pruned and the one under way is rolled back; the exit status is 130, as a shell
        gives a process that SIGINT ended."""
        report = self._report
        done = report.pruned_runs if report else 0
        total = f" of {report.total_runs}" if report else ""
        logger.warning(
            "workflow_prune: interrupted after %s%s runs pruned",
            done,
            total,
            extra={"prune": report.as_dict() if report else None},
        )
        return CommandError(
            f"interrupted: {done}{total} run(s) pruned in the batches that committed; "
            "the batch under way was rolled back",
            returncode=130,
        )

    def _progress(self, report: PruneReport) -> None:
        self._report = report
        if self._quiet:
            return
        total = max(report.total_runs, 1)
        done = report.pruned_runs + len(report.skipped)
        filled = int(_BAR * done / total)
        self.stdout.write(
            f"[{'#' * filled}{'-' * (_BAR - filled)}] {done}/{report.total_runs} runs "
            f"({100 * done // total}%)"
        )

    def _summary(self, report: PruneReport) -> None:
        which = "archived" if report.archived_only else "closed"
        if report.dry_run:
            self.stdout.write(
                f"dry run: {report.total_runs} run(s) {which} before {report.cutoff} would be "
                "pruned; rows that would be deleted:"
            )
        else:
            self.stdout.write(
                f"pruned {report.pruned_runs} run(s) {which} before {report.cutoff}"
                + (f", exported {report.exported}" if report.exported else "")
                + "; rows deleted:"
            )
        for name, count in sorted(report.rows.items()):
            self.stdout.write(f"  {name}: {count}")
        for skipped in report.skipped:
            self.stdout.write(self.style.ERROR(f"  kept {skipped['run_id']}: {skipped['reason']}"))
