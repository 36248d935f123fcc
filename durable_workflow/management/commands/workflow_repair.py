"""``manage.py workflow_repair``: re-send lost task messages and reclaim expired leases."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durable_workflow.conf import get_settings
from durable_workflow.executor import repair_pass


class Command(BaseCommand):
    help = "Re-dispatch ready tasks nobody claimed, expired leases and due timers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", action="store_true", help="keep running passes")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between passes with --loop (default: REPAIR_INTERVAL_SECONDS)",
        )
        parser.add_argument("--json", action="store_true", help="print a JSON report")

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is None:
            interval = get_settings().REPAIR_INTERVAL_SECONDS
        while True:
            report = repair_pass()
            if options["json"]:
                self.stdout.write(json.dumps(report.as_dict()))
            else:
                self.stdout.write(
                    f"reclaimed {report.reclaimed} expired leases, "
                    f"re-sent {report.redispatched} tasks"
                )
            if not options["loop"]:
                return
            time.sleep(interval)
