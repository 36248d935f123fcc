"""``manage.py run_example``: run the example workflows on a real Celery worker.

Starts ``celery worker`` as a subprocess, starts each example workflow, plays the client
side of the interactive ones (a signal, queries and updates sent while the worker runs),
waits for the runs to close, prints their output and history, then stops the worker.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from durable_workflow import CommandRejected, WorkflowStub
from durable_workflow.codec import envelope
from durable_workflow.engine.events import HistoryEvent

WORKER_STOP_SECONDS = 15.0
SUMMARY_WIDTH = 92
#: Payload keys too long or too internal to help a reader of the history.
SKIPPED_KEYS = {
    "lease_owner",
    "lease_expires_at",
    "payload_codec",
    "run_number",
    "workflow_definition_fingerprint",
    "condition_definition_fingerprint",
}
EMPTY: tuple[Any, ...] = (None, "", [], {})
#: ``*_id`` keys are skipped, except these.
KEPT_IDS = {"parallel_group_id", "selection_group_id"}
#: Group metadata other than the group id and the member's index.
SKIPPED_KEYS |= {"parallel_group_base_sequence", "parallel_group_size", "parallel_group_path"}
SHORT_NAMES = {
    "sequence": "step",
    "parallel_group_id": "group",
    "parallel_group_index": "member",
    "parallel_group_kind": "kind",
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
    #: Plays the client side while the worker runs the workflow (signals, updates).
    drive: Callable[[Command, WorkflowStub], None] | None = None


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
    Example(
        "refund-approval",
        "orders.refund-approval",
        ("order-9012", 2500),
        "waits for the approved-by signal, sent below while the worker runs",
        drive=lambda command, stub: command._approve_refund(stub),
    ),
    Example(
        "cart",
        "orders.cart",
        ("linus@example.com",),
        "a query and validated updates; a condition wait ends at checkout",
        drive=lambda command, stub: command._fill_cart(stub),
    ),
    Example(
        "cheapest-shipping",
        "orders.cheapest-shipping",
        (1200,),
        "fan-out: four carrier quotes in one nested all() group",
    ),
    Example(
        "fulfil-order",
        "orders.fulfil-order",
        ("order-3456", ["SKU-7", "SKU-3"]),
        "a child workflow (pack-parcel) with its own parallel steps, then an activity",
    ),
    Example(
        "checkout-saga",
        "orders.checkout-saga",
        ("order-7890", "SKU-42", 4999),
        "a saga: the third step fails for good, the first two are compensated",
    ),
]
#: How long a driver waits for a run to reach the point where it can be driven.
DRIVE_TIMEOUT_SECONDS = 30.0


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
            failed = []
            for example, stub in started:
                if example.drive is not None:
                    self._drive(example, stub)
                if not self._await_and_report(example, stub, worker, options["timeout"]):
                    failed.append(example.name)
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

    # --------------------------------------------------------------- drivers
    def _drive(self, example: Example, stub: WorkflowStub) -> None:
        self._say(f"driving {example.type_key} ({stub.id()}) from the client side:")
        try:
            example.drive(self, stub)  # type: ignore[misc]
        except (CommandRejected, TimeoutError) as exc:
            self.stderr.write(f"   could not drive {example.name}: {exc}")

    def _approve_refund(self, stub: WorkflowStub) -> None:
        # A query replays the run's history in this process; it writes nothing.
        _wait_for(lambda: stub.query("stage") == "waiting-for-approval", "the approval wait")
        self._say(f"   query stage -> {stub.query('stage')!r}")
        result = stub.signal("approved-by", "manager@example.com")
        self._say(f"   signal approved-by('manager@example.com') -> {result.outcome}")

    def _fill_cart(self, stub: WorkflowStub) -> None:
        _wait_for(lambda: stub.refresh().status() == "waiting", "the cart to wait for checkout")
        # update() waits (up to wait_timeout) until the worker has applied the update.
        count = stub.update("add-item", "SKU-1", 2, wait_timeout=DRIVE_TIMEOUT_SECONDS)
        self._say(f"   update add-item('SKU-1', 2) -> {count}")
        count = stub.update("add-item", "SKU-2", wait_timeout=DRIVE_TIMEOUT_SECONDS)
        self._say(f"   update add-item('SKU-2') -> {count}")
        rejected = stub.attempt_update("add-item", "SKU-3", 0)
        self._say(
            f"   update add-item('SKU-3', 0) -> {rejected.update_status}: "
            f"{rejected.rejection_reason} ({rejected.failure_message})"
        )
        self._say(f"   query summary -> {stub.query('summary')!r}")
        items = stub.update("checkout", wait_timeout=DRIVE_TIMEOUT_SECONDS)
        self._say(f"   update checkout -> {items!r}")

    def _report(self, example: Example, stub: WorkflowStub) -> None:
        style = self.style.SUCCESS if stub.completed() else self.style.ERROR
        self.stdout.write("")
        self.stdout.write(style(f"== {example.type_key}  {stub.id()}  status={stub.status()}"))
        if stub.completed():
            self.stdout.write(f"   output: {stub.output()!r}")
        elif stub.running():
            self.stdout.write("   still running when the timeout expired")
        self._history(stub, indent="   ")
        self.stdout.flush()

    def _history(self, stub: WorkflowStub, indent: str) -> None:
        for event in stub.history():
            line = f"{indent}{event.sequence:>3}  {event.event_type:<24} {_summary(event)}"
            self.stdout.write(line.rstrip())
            if event.event_type == "ChildWorkflowScheduled":
                child = WorkflowStub.load(event.payload["child_instance_id"])
                self.stdout.write(
                    f"{indent}      child {child.workflow_type()} status={child.status()} "
                    f"output={child.output()!r}"
                )
                self._history(child, indent + "      ")

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
        skipped = key.endswith(("_id", "_class")) and key not in KEPT_IDS
        if key in SKIPPED_KEYS or skipped or value in EMPTY:
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


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DRIVE_TIMEOUT_SECONDS
    while not condition():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.1)


def _require_migrated() -> None:
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise CommandError("the database is not migrated: run `python manage.py migrate` first")
