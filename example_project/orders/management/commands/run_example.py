"""``manage.py run_example``: run the example workflows on a real Celery worker.

Starts ``celery worker`` as a subprocess, starts each example workflow, waits for the
runs to close, prints their output and history, then stops the worker.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from durable_workflow import WorkflowStub
from durable_workflow.codec import envelope
from durable_workflow.engine.events import HistoryEvent

WORKER_STOP_SECONDS = 15.0
SUMMARY_WIDTH = 92
#: Payload keys too long or too internal to help a reader of the history.
SKIPPED_KEYS = {"lease_owner", "lease_expires_at", "payload_codec", "run_number"}
EMPTY: tuple[Any, ...] = (None, "", [], {})
SHORT_NAMES = {
    "sequence": "step",
    "activity_type": "activity",
    "workflow_type": "workflow",
    "attempt_number": "attempt",
    "retry_backoff_seconds": "retry_in",
    "delay_seconds": "delay",
    "exception_type": "error",
}


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    type_key: str
    args: tuple[Any, ...]
    about: str


EXAMPLES = [
    Example(
        "place-order",
        "orders.place-order",
        ("ada@example.com", "SKU-42", 2, 1999),
        "three sequential activities and a recorded uuid4",
    ),
    Example(
        "capture-with-retries",
        "orders.capture-with-retries",
        ("ch-1234",),
        "an activity that fails twice, then succeeds on attempt 3",
    ),
    Example(
        "ship-then-follow-up",
        "orders.ship-then-follow-up",
        ("order-5678", "grace@example.com"),
        "an activity, a 2-second durable timer, a side effect, an activity",
    ),
]


class Command(BaseCommand):
    help = "Run the example workflows on a Celery worker subprocess and print their history."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workflow",
            choices=[example.name for example in EXAMPLES],
            help="run only this example (default: all)",
        )
        parser.add_argument(
            "--timeout", type=float, default=60.0, help="seconds to wait for each run"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        _require_migrated()
        chosen = [e for e in EXAMPLES if options["workflow"] in (None, e.name)]
        worker = self._start_worker()
        try:
            started = [(example, self._start(example)) for example in chosen]
            failed = [
                example.name
                for example, stub in started
                if not self._await_and_report(example, stub, worker, options["timeout"])
            ]
        finally:
            self._stop_worker(worker)
        if failed:
            raise CommandError(f"examples that did not complete: {', '.join(failed)}")
        self._say(self.style.SUCCESS(f"all {len(chosen)} example(s) completed"))

    # ---------------------------------------------------------------- worker
    def _start_worker(self) -> subprocess.Popen[bytes]:
        base_dir = str(settings.BASE_DIR)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [base_dir, env.get("PYTHONPATH")]))
        env.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
        command = [
            sys.executable, "-m", "celery", "-A", "example_project", "--quiet", "worker",
            "--pool=solo", "-Q", "celery", "--loglevel=WARNING",
            "--without-gossip", "--without-mingle", "-n", f"example-{os.getpid()}@%h",
        ]  # fmt: skip
        self._say(f"starting a Celery worker: celery {' '.join(command[3:])}")
        return subprocess.Popen(command, cwd=base_dir, env=env)

    def _stop_worker(self, worker: subprocess.Popen[bytes]) -> None:
        if worker.poll() is not None:
            return
        worker.send_signal(signal.SIGTERM)  # warm shutdown: finish the current task
        try:
            worker.wait(timeout=WORKER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.stderr.write("worker did not stop in time; killing it")
            worker.kill()
            worker.wait()
        self._say(f"worker stopped (exit code {worker.returncode})")

    # ------------------------------------------------------------------- runs
    def _start(self, example: Example) -> WorkflowStub:
        # A fresh id per invocation: instance ids are unique for good, so re-running
        # the command must not reuse one.
        stub = WorkflowStub.make(example.type_key, f"{example.name}-{uuid.uuid4().hex[:12]}")
        stub.start(*example.args)
        self._say(f"started {example.type_key} as {stub.id()}: {example.about}")
        return stub

    def _await_and_report(
        self,
        example: Example,
        stub: WorkflowStub,
        worker: subprocess.Popen[bytes],
        timeout: float,
    ) -> bool:
        deadline = time.monotonic() + timeout
        while stub.running() or stub.status() == "reserved":
            if worker.poll() is not None:
                self.stderr.write(f"the worker exited with code {worker.returncode}")
                break
            if time.monotonic() >= deadline:
                break
            stub.wait(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
        self._report(example, stub)
        return stub.completed()

    def _report(self, example: Example, stub: WorkflowStub) -> None:
        style = self.style.SUCCESS if stub.completed() else self.style.ERROR
        self.stdout.write("")
        self.stdout.write(style(f"== {example.type_key}  {stub.id()}  status={stub.status()}"))
        if stub.completed():
            self.stdout.write(f"   output: {stub.output()!r}")
        elif stub.running():
            self.stdout.write("   still running when the timeout expired")
        for event in stub.history():
            line = f"   {event.sequence:>3}  {event.event_type:<24} {_summary(event)}"
            self.stdout.write(line.rstrip())
        self.stdout.flush()

    def _say(self, line: str) -> None:
        # The worker shares this terminal; flush so the two outputs interleave in order.
        self.stdout.write(line)
        self.stdout.flush()


def _summary(event: HistoryEvent) -> str:
    """``key=value`` pairs a reader cares about, payload envelopes decoded."""
    parts = []
    # JSON columns may reorder keys (PostgreSQL's jsonb does): put the familiar ones first.
    order = {key: index for index, key in enumerate(SHORT_NAMES)}
    items = sorted(event.payload.items(), key=lambda item: order.get(item[0], len(order)))
    for key, value in items:
        if key in SKIPPED_KEYS or key.endswith(("_id", "_class")) or value in EMPTY:
            continue
        if key == "activity_type" and event.event_type != "ActivityScheduled":
            continue  # the step number already ties the event to its activity
        if isinstance(value, dict) and set(value) == {"codec", "blob"}:
            value = envelope.decode(value)
        if key == "exception_type":
            value = str(value).rsplit(".", 1)[-1]
        parts.append(f"{SHORT_NAMES.get(key, key)}={_short(value)}")
    text = " ".join(parts)
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 3] + "..."


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 48 else text[:45] + "..."


def _require_migrated() -> None:
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise CommandError("the database is not migrated: run `python manage.py migrate` first")
