"""``manage.py schedule_tick``: fire every due schedule once (safe on many machines)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durable_workflow.operations import loops
from durable_workflow.schedules.audit import timestamp
from durable_workflow.schedules.tasks import tick_interval
from durable_workflow.schedules.ticker import TickReport, tick


class Command(BaseCommand):
    help = "Start the workflow runs of every due schedule, once, and drain buffered fires."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON report per tick")
        parser.add_argument(
            "--loop",
            action="store_true",
            help="keep ticking through database and broker outages; SIGTERM or Ctrl-C "
            "stops after the current tick",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between ticks with --loop (default: SCHEDULE_TICK_INTERVAL_SECONDS, 10)",
        )
        parser.add_argument(
            "--limit", type=int, default=None, help="at most this many due schedules per tick"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"] if options["interval"] is not None else tick_interval()

        def step() -> None:
            self._report(tick(limit=options["limit"]), as_json=options["json"])

        if not options["loop"]:
            step()
            return
        stop = threading.Event()
        with loops.stop_on_signals(stop):
            loops.run_forever(
                step,
                name="schedule_tick",
                interval=interval,
                pause=lambda seconds: self._pause(stop, seconds),
            )

    def _pause(self, stop: threading.Event, interval: float) -> bool:
        """Sleep between ticks (or after a failed one); True when asked to stop."""
        return stop.wait(interval)

    def _report(self, report: TickReport, *, as_json: bool) -> None:
        rows = [_jsonable(row) for row in report.results]
        if as_json:
            document = {"lock_acquired": report.lock_acquired, "results": rows}
            self.stdout.write(json.dumps(document, sort_keys=True))
            self.stdout.flush()
            return
        if not report.lock_acquired:
            self.stdout.write("another schedule_tick holds the lock; nothing done")
            return
        for row in rows:
            target = row["instance_id"] or row["reason"] or ""
            self.stdout.write(f"{row['schedule_id']}: {row['outcome']} {target}".rstrip())
        self.stdout.write(f"{len(rows)} schedule action(s)")


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {
        key: timestamp(value) if isinstance(value, dt.datetime) else value
        for key, value in row.items()
    }
