"""``manage.py workflow_archive``: archive closed runs by id or by filter."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from durable_workflow import clock
from durable_workflow.logs import get_logger
from durable_workflow.management.command_options import (
    add_namespace_argument,
    add_request_id_argument,
    namespace_option,
    request_id_option,
)
from durable_workflow.models import TERMINAL_RUN_STATUSES, WorkflowRun
from durable_workflow.operations.archiving import (
    ArchiveReport,
    archive_selected,
    archive_targets,
    candidates,
)
from durable_workflow.operations.prune import parse_age
from durable_workflow.text import check_reason

logger = get_logger("durable_workflow")


class Command(BaseCommand):
    help = (
        "Archive closed runs: they leave the default run lists, nothing is deleted. Name "
        "instances (--instance-id) or runs (--run-id), or select closed runs by --type, "
        "--status, --older-than and --closed-before."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--instance-id",
            action="append",
            default=[],
            metavar="ID",
            help="archive every closed run of this instance (repeatable)",
        )
        parser.add_argument(
            "--run-id",
            action="append",
            default=[],
            metavar="RUN_ID",
            help="archive this closed run (repeatable)",
        )
        add_namespace_argument(parser)
        add_request_id_argument(parser)
        parser.add_argument("--type", default=None, help="only runs of this workflow type")
        parser.add_argument(
            "--status",
            action="append",
            choices=sorted(TERMINAL_RUN_STATUSES),
            help="only runs with this status (repeatable; default: every closed status)",
        )
        parser.add_argument(
            "--older-than", default=None, metavar="AGE", help="closed at least this long ago"
        )
        parser.add_argument(
            "--closed-before",
            default=None,
            metavar="DATETIME",
            help="closed at or before this ISO 8601 moment (UTC unless it says otherwise)",
        )
        parser.add_argument("--reason", default=None, help="recorded on each archive command")
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be archived, change nothing"
        )
        parser.add_argument("--limit", type=int, default=None, help="archive at most N runs")
        parser.add_argument("--batch-size", type=int, default=500, help="runs read per query")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            check_reason(options["reason"])
        except ValueError as exc:
            raise CommandError(f"--reason: {exc}") from None
        named = options["instance_id"] or options["run_id"]
        filtered = any(options[key] for key in ("type", "status", "older_than", "closed_before"))
        if named and filtered:
            raise CommandError("name instances or runs, or select by filter: not both")
        if not named and not filtered:
            raise CommandError(
                "say what to archive: --instance-id, --run-id, or a filter (--type, "
                "--status, --older-than, --closed-before)"
            )
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        if named:
            report = archive_targets(
                self._targets(options),
                reason=options["reason"],
                dry_run=options["dry_run"],
                request_id=request_id_option(options),
            )
        else:
            selected = candidates(
                closed_before=self._cutoff(options),
                workflow_type=options["type"],
                statuses=options["status"],
            )
            if options["namespace"] is not None:
                selected = selected.filter(namespace=namespace_option(options))
            report = archive_selected(
                selected,
                reason=options["reason"],
                dry_run=options["dry_run"],
                limit=options["limit"],
                batch_size=options["batch_size"],
                progress=None if options["json"] else self._progress,
                request_id=request_id_option(options),
            )
        logger.info(
            "workflow_archive: %s (dry run: %s)",
            report.outcomes,
            report.dry_run,
            extra={"archive": report.as_dict()},
        )
        self._print(report, as_json=options["json"])
        if any(entry["outcome"] == "not_found" for entry in report.rejected):
            raise CommandError("some instances or runs were not found")

    def _targets(self, options: dict[str, Any]) -> list[tuple[str, uuid.UUID | None, str]]:
        space = namespace_option(options)
        targets: list[tuple[str, uuid.UUID | None, str]] = [
            (instance_id, None, space) for instance_id in options["instance_id"]
        ]
        for text in options["run_id"]:
            try:
                run_id = uuid.UUID(text)
            except ValueError:
                raise CommandError(f"not a run id: {text!r}") from None
            found = (
                WorkflowRun.objects.filter(id=run_id)
                .values_list("instance_id", "namespace")
                .first()
            )
            if found is None:
                raise CommandError(f"no workflow run {text}")
            targets.append((found[0], run_id, found[1]))
        return targets

    @staticmethod
    def _cutoff(options: dict[str, Any]) -> dt.datetime | None:
        cutoffs = []
        if options["older_than"]:
            try:
                cutoffs.append(clock.now() - parse_age(options["older_than"]))
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        if options["closed_before"]:
            moment = parse_datetime(options["closed_before"])
            if moment is None:
                raise CommandError(f"not a date and time: {options['closed_before']!r}")
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
            cutoffs.append(moment)
        return min(cutoffs) if cutoffs else None

    def _progress(self, report: ArchiveReport) -> None:
        self.stdout.write(f"{report.done}/{report.total_runs} runs")

    def _print(self, report: ArchiveReport, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
            return
        verb = "dry run, nothing changed" if report.dry_run else "archive"
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(report.outcomes.items()))
        self.stdout.write(f"{verb}: {counts or 'nothing to do'}")
        for entry in report.rejected:
            target = entry["instance_id"] + (f" ({entry['run_id']})" if "run_id" in entry else "")
            self.stdout.write(self.style.WARNING(f"  {target}: {entry['outcome']}"))
