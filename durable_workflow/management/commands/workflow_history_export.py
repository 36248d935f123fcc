"""``manage.py workflow_history_export``: write one run's history export bundle, or with
``--recent N --output-dir DIR`` the bundles of the runs the deploy gate would replay."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.management.command_options import (
    add_namespace_argument,
    namespace_option,
)
from durable_workflow.operations import replay_gate
from durable_workflow.operations.export import ExportError, build_bundle
from durable_workflow.operations.redaction import load_redactor


class Command(BaseCommand):
    help = (
        "Export a run's history and durable rows as a durable-workflow.v2.history-export "
        "bundle with an integrity checksum (the current run unless --run-id is given)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("instance_id", nargs="?", help="workflow instance id")
        replay_gate.add_selection_arguments(parser, "export (to --output-dir)")
        parser.add_argument(
            "--output-dir",
            default=None,
            metavar="DIR",
            help="with --recent: write DIR/<instance>/run-<n>-<run id>.json per run",
        )
        parser.add_argument("--run-id", default=None, help="export this run of the instance")
        add_namespace_argument(parser)
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
        if options["recent"] is not None:
            self._export_recent(options)
            return
        if not options["instance_id"]:
            raise CommandError("name an instance id, or use --recent N --output-dir DIR")
        redactor = load_redactor(options["redactor"]) if options["redactor"] else None
        try:
            bundle = build_bundle(
                options["instance_id"],
                run_id=options["run_id"],
                redactor=redactor,
                namespace=namespace_option(options),
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

    def _export_recent(self, options: dict[str, Any]) -> None:
        if options["instance_id"] or options["run_id"] or options["output"]:
            raise CommandError("--recent exports many runs: use --output-dir, not an instance")
        if not options["output_dir"]:
            raise CommandError("--recent needs --output-dir DIR")
        if options["recent"] < 0:
            raise CommandError("--recent must be 0 or more")
        if options["redactor"]:
            raise CommandError("redacted bundles cannot be replayed: --recent takes no --redactor")
        runs = replay_gate.select_runs(options["recent"], options["types"])
        written = replay_gate.export_runs(runs, pathlib.Path(options["output_dir"]))
        self.stderr.write(f"exported {len(written)} runs to {options['output_dir']}")
