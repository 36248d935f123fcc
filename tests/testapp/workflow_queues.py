"""Workflows started on a queue that limits its runs (issue 26): each holds its slot
for as long as its one activity takes."""

from __future__ import annotations

import time

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from tests.testapp.models import Invocation

#: The queue of the tests' workflow-queue limits (routed per start: a class ``queue``
#: would make the doctor of every other test expect a worker on it).
REPORTS = "reports"


class HoldSlot(Activity):
    """Sleeps ``hold`` seconds; its row says when its code ran (wall clock, shared by the
    processes of one machine)."""

    type_key = "tests.hold-slot"

    def handle(self, n: int, hold: float) -> int:
        began = time.time()
        time.sleep(hold)
        Invocation.objects.create(name="slot", key=f"{began:.6f}:{time.time():.6f}", attempt=n)
        return n


class QueuedReport(Workflow):
    """One activity, then done."""

    type_key = "tests.queued-report"

    def handle(self, n: int, hold: float) -> int:
        return dw.activity(HoldSlot, n, hold)


class WaitsForGo(Workflow):
    """Holds its slot until signalled ``go`` (the tests decide when a slot frees)."""

    type_key = "tests.waits-for-go"
    signals = ["go"]

    def handle(self, n: int) -> int:
        dw.wait_signal("go")
        return n


class StartsQueuedChild(Workflow):
    """Starts one ``WaitsForGo`` child on the reports queue with ``priority``."""

    type_key = "tests.starts-queued-child"

    def handle(self, priority: int) -> int:
        options = dw.ChildWorkflowOptions(queue=REPORTS, priority=priority)
        return dw.child(WaitsForGo, options, priority)


class ContinuesOnce(Workflow):
    """Continues as new once, then waits for ``go``: the slot goes with it."""

    type_key = "tests.continues-once"
    signals = ["go"]

    def handle(self, round: int) -> int:
        if round == 0:
            dw.continue_as_new(1)
        dw.wait_signal("go")
        return round
