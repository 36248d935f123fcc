"""``manage.py workflow_replay``: replay exported histories or stored runs against the
current code; ``--recent N`` is the deploy gate (docs/how-to/deploy-gate.md)."""

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
from durable_workflow.operations.export import ExportError
from durable_workflow.operations.replay import (
    ReplayResult,
    bundle_files,
    replay_file,
    replay_instance,
)


class Command(BaseCommand):
    help = (
        "Replay history export bundles (files, or every *.json in a folder) or stored "
        "instances against the deployed workflow code; exit 1 on any non-determinism. "
        "--recent N replays every open run and the N last closed runs of each type."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "targets", nargs="*", help="bundle file, folder of bundles, or workflow instance id"
        )
        replay_gate.add_selection_arguments(parser, "replay")
        parser.add_argument("--run-id", default=None, help="with an instance id: that run")
        add_namespace_argument(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON report")
        parser.add_argument(
            "--no-verify", action="store_true", help="skip the bundle integrity check"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        recent = options["recent"]
        if recent is None and not options["targets"]:
            raise CommandError("name bundles, folders or instances, or use --recent N")
        if recent is not None and recent < 0:
            raise CommandError("--recent must be 0 or more")
        if options["types"] and recent is None:
            raise CommandError("--type goes with --recent")
        results = self._targets(options)
        if recent is not None:
            results += replay_gate.replay_runs(replay_gate.select_runs(recent, options["types"]))
        self._report(results, options)

    def _targets(self, options: dict[str, Any]) -> list[ReplayResult]:
        results: list[ReplayResult] = []
        for target in options["targets"]:
            path = pathlib.Path(target)
            if path.exists():
                found = list(bundle_files(path))
                if not found:
                    raise CommandError(f"no *.json bundle under {path}")
                results += [replay_file(f, verify=not options["no_verify"]) for f in found]
                continue
            try:
                results.append(
                    replay_instance(
                        target, run_id=options["run_id"], namespace=namespace_option(options)
                    )
                )
            except ExportError as exc:
                raise CommandError(
                    f"{target}: not a file, a folder or an instance ({exc})"
                ) from None
        return results

    def _report(self, results: list[ReplayResult], options: dict[str, Any]) -> None:
        failed = [r for r in results if not r.ok]
        summary = replay_gate.summarize(results)
        if options["json"]:
            report = {
                "replayed": len(results),
                "failed": len(failed),
                "by_type": [row.as_dict() for row in summary],
                "results": [r.as_dict() for r in results],
            }
            self.stdout.write(json.dumps(report, indent=2))
        else:
            # With --recent, clean runs are only counted in the table (-v 2 lists them).
            show_all = options["recent"] is None or options["verbosity"] > 1
            for result in results if show_all else failed:
                self._print(result)
            self.stdout.write("")
            for line in replay_gate.table(summary):
                self.stdout.write(line)
            self.stdout.write(f"\n{len(results) - len(failed)} of {len(results)} replayed cleanly")
        if failed:
            raise CommandError(f"{len(failed)} of {len(results)} replays failed", returncode=1)

    def _print(self, result: ReplayResult) -> None:
        where = f"{result.source} ({result.instance_id} run {result.run_id})"
        if result.ok:
            self.stdout.write(self.style.SUCCESS("ok ") + f"{where}: {result.message}")
            return
        label = "NON-DETERMINISTIC " if result.status == "nondeterministic" else "ERROR "
        self.stdout.write(self.style.ERROR(label) + where)
        if result.status == "nondeterministic":
            self.stdout.write(f"    step:      {result.step}")
            self.stdout.write(f"    recorded:  {result.recorded or 'nothing'}")
            self.stdout.write(f"    requested: {result.requested or 'nothing'}")
            if result.call_site:
                self.stdout.write(f"    call site: {result.call_site}")
            for step in result.recent_steps:
                self.stdout.write(f"    before:    {step}")
        self.stdout.write(f"    {result.message}")
