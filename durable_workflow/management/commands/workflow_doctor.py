"""``manage.py workflow_doctor``: is this deployment able to run workflows right now?"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.operations.doctor import DoctorContext, report, run_checks

_MARKS = {"ok": "✓", "warning": "!", "error": "✗"}


class Command(BaseCommand):
    help = (
        "Check the database, migrations, Celery app, broker, workers, cache locks, clock "
        "and the durable work itself; print what to do about each problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the JSON report")
        parser.add_argument(
            "--strict", action="store_true", help="exit with status 1 on warnings too"
        )
        parser.add_argument(
            "--stuck-after",
            type=float,
            default=None,
            metavar="SECONDS",
            help="age after which a due ready task or timer counts as stuck "
            "(default: max(60, 10 x REDISPATCH_AFTER_SECONDS))",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=2.0,
            metavar="SECONDS",
            help="broker connection timeout (worker inspection waits half of it, at least 1 s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ctx = DoctorContext(
            stuck_after_seconds=options["stuck_after"],
            broker_timeout=options["timeout"],
            inspect_timeout=max(1.0, options["timeout"] / 2),
        )
        results = run_checks(ctx)
        document = report(results, now=ctx.now)
        if options["json"]:
            self.stdout.write(json.dumps(document, indent=2, sort_keys=False))
        else:
            self._print(document)
        summary = document["summary"]
        if summary["error"] or (options["strict"] and summary["warning"]):
            raise CommandError(
                f"workflow_doctor found {summary['error']} error(s) and "
                f"{summary['warning']} warning(s)",
                returncode=1,
            )

    def _print(self, document: dict[str, Any]) -> None:
        styles = {
            "ok": self.style.SUCCESS,
            "warning": self.style.WARNING,
            "error": self.style.ERROR,
        }
        for check in document["checks"]:
            style = styles[check["status"]]
            self.stdout.write(
                style(f"{_MARKS[check['status']]} {check['title']}: ") + check["message"]
            )
            instances = check["details"].get("affected_instances")
            if check["status"] != "ok" and instances and instances["count"]:
                self.stdout.write(f"    instances: {_listed(instances)}")
            if check["status"] != "ok" and check["next_step"]:
                self.stdout.write(f"    → {check['next_step']}")
        summary = document["summary"]
        self.stdout.write(
            f"\n{summary['ok']} ok, {summary['warning']} warning(s), {summary['error']} error(s)"
        )


def _listed(instances: dict[str, Any]) -> str:
    """``a, b, c`` or ``a, b, … and 32 more`` (the first ids by name, then a count)."""
    first, more = instances["first"], instances["count"] - len(instances["first"])
    return ", ".join(first) + (f" and {more} more" if more > 0 else "")
