"""``manage.py workflow_history_export``: write one run's history export bundle."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.operations.export import ExportError, build_bundle
from durable_workflow.operations.redaction import load_redactor


class Command(BaseCommand):
    help = (
        "Export a run's history and durable rows as a durable-workflow.v2.history-export "
        "bundle with an integrity checksum (the current run unless --run-id is given)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("instance_id", help="workflow instance id")
        parser.add_argument("--run-id", default=None, help="export this run of the instance")
        parser.add_argument(
            "--output", default=None, metavar="PATH", help="write to PATH instead of stdout"
        )
        parser.add_argument("--pretty", action="store_true", help="indent the JSON")
        parser.add_argument(
            "--redactor",
            default=None,
            metavar="DOTTED.PATH",
            help="redact payloads with this HistoryExportRedactor (class or callable)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        redactor = load_redactor(options["redactor"]) if options["redactor"] else None
        try:
            bundle = build_bundle(
                options["instance_id"], run_id=options["run_id"], redactor=redactor
            )
        except ExportError as exc:
            raise CommandError(str(exc)) from None
        text = json.dumps(
            bundle, indent=2 if options["pretty"] else None, ensure_ascii=False, sort_keys=False
        )
        if options["output"]:
            path = pathlib.Path(options["output"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n", encoding="utf-8")
            self.stderr.write(
                f"exported run {bundle['selected_run']['run_id']} of "
                f"{bundle['workflow']['instance_id']} "
                f"({len(bundle['history_events'])} events) to {path}"
            )
        else:
            self.stdout.write(text)
