"""``manage.py workflow_bulk``: one operator action over a filtered selection of runs,
as a bulk job processed in batches (the runs list's bulk job, from the command line)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from durable_workflow.admin.operations import preview
from durable_workflow.admin.run_list import _failed_with
from durable_workflow.admin.targets import Target
from durable_workflow.management.command_options import namespace_option
from durable_workflow.models import BulkJob, RunStatus, WorkflowRun
from durable_workflow.operations import bulk
from durable_workflow.text import check_reason


class Command(BaseCommand):
    help = (
        "Cancel, terminate, repair, retry, reset or archive every run matching --type, "
        "--status, --failed, --since and --instance-prefix, in batches with progress. "
        "--dry-run says what would happen; --enqueue hands the job to a Celery worker; "
        "--resume JOB and --cancel JOB act on an existing job."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("operation", nargs="?", choices=bulk.BULK_OPERATIONS)
        parser.add_argument("--reason", default=None, help="recorded on each run's command")
        parser.add_argument("--type", default=None, help="only runs of this workflow type")
        parser.add_argument(
            "--status",
            action="append",
            choices=sorted(RunStatus.values),
            help="only runs with this status (repeatable)",
        )
        parser.add_argument(
            "--failed",
            default=None,
            metavar="EXCEPTION",
            help="only runs with a recorded failure of this exception type (short or full name)",
        )
        parser.add_argument(
            "--since",
            default=None,
            metavar="DATETIME",
            help="only runs created at or after this ISO 8601 moment",
        )
        parser.add_argument("--instance-prefix", default=None, help="instance ids starting so")
        parser.add_argument("--namespace", default=None, help="only runs of this namespace")
        parser.add_argument(
            "--to",
            default="first_failure",
            help="reset only: the reset point (start, first_failure, event)",
        )
        parser.add_argument("--event", type=int, default=None, help="reset --to event: its id")
        parser.add_argument("--operator", default="cli", help="recorded as the job's operator")
        parser.add_argument("--batch-size", type=int, default=None, help="runs per batch")
        parser.add_argument("--dry-run", action="store_true", help="change nothing")
        parser.add_argument(
            "--enqueue", action="store_true", help="hand the job to a Celery worker and return"
        )
        parser.add_argument("--resume", default=None, metavar="JOB", help="go on with a job")
        parser.add_argument("--cancel", default=None, metavar="JOB", help="cancel a job")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["cancel"]:
            job = self._job(options["cancel"])
            done = bulk.cancel(job.pk)
            self.stdout.write(f"bulk job {job.pk}: {'cancelled' if done else job.status}")
            return
        if options["resume"]:
            job = self._job(options["resume"])
            if job.status == "failed":  # a batch raised: the pending items are left
                BulkJob.objects.filter(pk=job.pk).update(status="running", error="")
            self._process(job)
            return
        operation = options["operation"]
        if not operation:
            raise CommandError("name an operation, or --resume / --cancel a job")
        try:
            reason = check_reason(options["reason"])
        except ValueError as exc:
            raise CommandError(f"--reason: {exc}") from None
        if not reason:
            raise CommandError("--reason is required")
        runs, described = self._selection(options)
        data: dict[str, Any] = {"reason": reason}
        if operation == "reset":
            data.update(to=options["to"], event=options["event"])
        if options["dry_run"]:
            counts: dict[str, int] = {}
            selected = runs.values_list("instance_id", "id", "namespace")
            for instance_id, run_id, space in selected.iterator():
                outcome = preview(operation, Target(instance_id, run_id, space), data)
                counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
            summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "no runs"
            self.stdout.write(f"dry run ({described}): {summary}; nothing was changed")
            return
        job = bulk.create_job(
            operation,
            runs.values_list("instance_id", "id").iterator(),
            reason=reason,
            operator=options["operator"],
            filter=described,
            options=data,
            size=options["batch_size"],
        )
        self.stdout.write(f"bulk job {job.pk}: {operation} of {job.total} runs")
        if options["enqueue"]:
            bulk.enqueue(job)
            return
        self._process(job)

    def _job(self, job_id: str) -> BulkJob:
        try:
            return BulkJob.objects.get(pk=uuid.UUID(job_id))
        except (ValueError, BulkJob.DoesNotExist):
            raise CommandError(f"no bulk job {job_id!r}") from None

    def _process(self, job: BulkJob) -> None:
        def progress(j: BulkJob) -> None:
            self.stdout.write(
                f"batch {j.batches}: {j.processed}/{j.total} "
                f"({j.done} done, {j.skipped} skipped, {j.failed} failed) {j.status}"
            )

        job = bulk.process(job.pk, progress=progress)
        self.stdout.write(f"bulk job {job.pk}: {job.status}")

    def _selection(self, options: dict[str, Any]) -> tuple[QuerySet[WorkflowRun], str]:
        runs = WorkflowRun.objects.all()
        described = []
        if options["type"]:
            runs = runs.filter(workflow_type=options["type"])
            described.append(f"type={options['type']}")
        if options["status"]:
            runs = runs.filter(status__in=options["status"])
            described.append(f"status={','.join(options['status'])}")
        if options["failed"]:
            runs = runs.filter(pk__in=_failed_with(options["failed"]))
            described.append(f"failed={options['failed']}")
        if options["since"]:
            since = parse_datetime(options["since"])
            if since is None:
                raise CommandError(f"--since: not an ISO 8601 moment: {options['since']!r}")
            if since.tzinfo is None:
                since = since.replace(tzinfo=dt.UTC)
            runs = runs.filter(created_at__gte=since)
            described.append(f"since={options['since']}")
        if options["namespace"] is not None:
            space = namespace_option(options)
            runs = runs.filter(namespace=space)
            described.append(f"namespace={space}")
        if options["instance_prefix"]:
            runs = runs.filter(instance_id__startswith=options["instance_prefix"])
            described.append(f"instance-prefix={options['instance_prefix']}")
        if not described:
            raise CommandError(
                "select runs: --type, --status, --failed, --since or --instance-prefix"
            )
        return runs.order_by("pk"), " ".join(described)
