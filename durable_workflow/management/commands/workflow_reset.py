"""``manage.py workflow_reset``: reset a run (or fork it into a new instance).

The same command as ``WorkflowStub.reset()`` / ``fork()``, recorded with
``source="cli"``. ``--dry-run`` checks the point and prints what would be kept.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.engine.rewind import POINT_KINDS
from durable_workflow.exceptions import (
    InvalidInstanceIdError,
    InvalidValueError,
    ResetRefusedError,
    WorkflowNotFoundError,
)
from durable_workflow.executor.reset import reset_run
from durable_workflow.management.command_options import add_request_id_argument, request_id_option


class Command(BaseCommand):
    help = (
        "Start a new run of a run's instance from a point of its history (start, first "
        "failure, last workflow task, or the last workflow task before an event); with "
        "--fork, into a new instance."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", help="the run to reset (its instance's current run)")
        point = parser.add_mutually_exclusive_group()
        point.add_argument(
            "--to",
            choices=POINT_KINDS,
            default=None,
            help="the point kind (default: last_workflow_task)",
        )
        point.add_argument(
            "--event",
            type=int,
            default=None,
            metavar="SEQUENCE",
            help="keep the history before the last workflow task at or before this event",
        )
        parser.add_argument(
            "--fork", action="store_true", help="start the new run in a new instance"
        )
        parser.add_argument(
            "--instance-id", default=None, metavar="ID", help="the fork's instance id"
        )
        parser.add_argument("--reason", default="", help="operator's reason, recorded")
        parser.add_argument("--dry-run", action="store_true", help="check the point; write nothing")
        add_request_id_argument(parser)
        parser.add_argument("--json", action="store_true", help="print a JSON report")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["fork"] != (options["instance_id"] is not None):
            raise CommandError("--fork and --instance-id go together")
        to: str | int = (
            options["event"]
            if options["event"] is not None
            else (options["to"] or "last_workflow_task")
        )
        try:
            result = reset_run(
                options["run_id"],
                to=to,
                reason=options["reason"],
                new_instance_id=options["instance_id"],
                source="cli",
                dry_run=options["dry_run"],
                request_id=request_id_option(options),
            )
        except ResetRefusedError as exc:
            raise CommandError(f"refused: {exc}") from None
        except (WorkflowNotFoundError, InvalidValueError, InvalidInstanceIdError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(dataclasses.asdict(result)))
            return
        point = result.reset_point
        verb = "would start" if result.dry_run else "started"
        self.stdout.write(
            f"{result.kind} of run {result.reset_from_run_id}: {verb} a new run of "
            f"{result.instance_id!r}"
            + (f" ({result.run_id})" if result.run_id else "")
            + f"; kept {point['kept_events']} events (cut before event {point['cut']}), "
            f"re-issued steps {point['reissued_steps'] or 'none'}, "
            f"re-applied {point['reapplied_signals']} signal(s)"
            + ("; the old run was terminated" if result.terminated_old_run else "")
        )
