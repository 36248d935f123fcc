"""Queues that limit their runs, with real Celery workers, Redis and PostgreSQL (issue 26).

What is measured: the runs open and started at once, from their history (a run has
started once its body scheduled its activity; it holds its slot until it closes), the
intervals the activity code itself recorded, the order the waiting runs started in,
and the broker deliveries of workflow task messages (the workers' ``received`` lines).
The bounds hold whatever the machine's speed.

The client process (this test) starts the runs, so it declares the same limits as
the workers: every process of a fleet reads one ``QUEUES`` setting.
"""

from __future__ import annotations

import json
import re

import pytest

from durable_workflow import StartOptions, WorkflowStub
from durable_workflow.engine.events import EventType
from durable_workflow.models import HistoryEvent, Task, WorkflowRun
from tests.acceptance.conftest import wait_for
from tests.acceptance.test_queue_limits_worker import deliveries as activity_deliveries
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

QUEUES = {"reports": {"workflow_concurrency": 2}, "serial": {"workflow_concurrency": 1}}
SETTINGS = {"DW_EXTRA_SETTINGS_JSON": json.dumps({"QUEUES": QUEUES})}
WORKER_QUEUES = "celery,reports,serial"
RECEIVED = re.compile(r"Task durable_workflow\.workflow_task\[[0-9a-f-]+\] received")


@pytest.fixture(autouse=True)
def limits(settings):
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": QUEUES}


def _start(instance_id: str, *args: object, queue: str, priority: int | None = None):
    stub = WorkflowStub.make("tests.queued-report", instance_id)
    stub.start(*args, options=StartOptions(queue=queue, priority=priority))
    return stub


def started_at(run_id: object):
    """When the run's body first ran: the moment its activity was scheduled."""
    return (
        HistoryEvent.objects.filter(run_id=run_id, event_type=EventType.ACTIVITY_SCHEDULED)
        .order_by("sequence")
        .values_list("recorded_at", flat=True)
        .first()
    )


def most_open_and_started(run_ids: list[object]) -> int:
    """The most runs that had started and not closed at one moment (closings first)."""
    edges = []
    for run in WorkflowRun.objects.filter(id__in=run_ids):
        edges += [(started_at(run.id), 1), (run.closed_at, -1)]
    most = running = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        running += step
        most = max(most, running)
    return most


def most_at_once_in_code() -> int:
    edges = []
    for row in Invocation.objects.filter(name="slot"):
        began, ended = (float(part) for part in row.key.split(":"))
        edges += [(began, 1), (ended, -1)]
    most = running = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        running += step
        most = max(most, running)
    return most


def workflow_deliveries(workers) -> int:
    return sum(len(RECEIVED.findall(worker.output())) for worker in workers)


def _wait_all(stubs, timeout: float = 180) -> None:
    for stub in stubs:
        stub.wait(timeout=timeout)
        assert stub.status() == "completed", (stub.id(), stub.status())


def test_a_workflow_queue_limit_of_two_holds_across_three_workers(start_worker):
    workers = [start_worker(queues=WORKER_QUEUES, env=SETTINGS) for _ in range(3)]
    count = 10
    stubs = [_start(f"accept-wq-{n}", n, 0.3, queue="reports") for n in range(count)]
    _wait_all(stubs)
    run_ids = [stub.run_id() for stub in stubs]
    assert most_open_and_started(run_ids) <= 2
    assert most_at_once_in_code() <= 2
    assert Invocation.objects.filter(name="slot").count() == count
    # First come, first served: a run never started before one started ahead of it in
    # line began... except the two let in together, whose first tasks may race.
    order = sorted(range(count), key=lambda n: started_at(run_ids[n]))
    assert all(abs(position - n) <= 1 for position, n in enumerate(order)), order
    # No busy loop: each run's workflow tasks are a few (start, activity result), and a
    # waiting run's message is sent once, when its slot frees; nothing is re-tried.
    tasks = Task.objects.filter(run_id__in=run_ids, task_type="workflow").count()
    sent = workflow_deliveries(workers)
    assert sent <= tasks + 2, (sent, tasks)
    assert not Task.objects.filter(queue_wait__isnull=False, status="ready").exists()


def test_fifo_then_priorities_order_the_line(start_worker):
    start_worker(queues=WORKER_QUEUES, env=SETTINGS)
    start_worker(queues=WORKER_QUEUES, env=SETTINGS)
    blocker = WorkflowStub.make("tests.waits-for-go", "accept-wq-blocker")
    blocker.start(0, options=StartOptions(queue="serial"))
    wait_for(
        lambda: WorkflowRun.objects.filter(
            id=blocker.run_id(), workflow_task_sequence__gt=0
        ).exists(),
        timeout=60,
        message="the blocker did not start",
    )
    line = [("a", None), ("b", 5), ("c", 1), ("d", None), ("e", 5), ("f", 1)]
    stubs = {
        name: _start(f"accept-wq-{name}", 0, 0, queue="serial", priority=p) for name, p in line
    }
    assert set(WorkflowRun.objects.filter(queue="serial").values_list("queue_slot", flat=True)) == {
        "held",
        "waiting",
    }
    blocker.signal("go")
    _wait_all(stubs.values())
    order = sorted(stubs, key=lambda name: started_at(stubs[name].run_id()))
    assert order == ["c", "f", "a", "b", "d", "e"]  # 1, 1, then 5 (none is 5) in order
    assert most_open_and_started([s.run_id() for s in stubs.values()]) == 1


def test_a_run_cancelled_while_waiting_frees_nothing_and_never_starts(start_worker):
    start_worker(queues=WORKER_QUEUES, env=SETTINGS)
    blocker = WorkflowStub.make("tests.waits-for-go", "accept-wq-c-blocker")
    blocker.start(0, options=StartOptions(queue="serial"))
    cancelled = _start("accept-wq-c-x", 1, 0, queue="serial")
    after = _start("accept-wq-c-y", 2, 0, queue="serial")
    cancelled.cancel("not wanted")
    assert cancelled.status() == "cancelled"
    blocker.signal("go")
    _wait_all([after])
    assert started_at(cancelled.run_id()) is None


@pytest.mark.slow  # a lease to expire and the repair pass to notice: `make test-all` (CI)
def test_a_killed_worker_does_not_leak_the_slot(start_worker):
    first = start_worker(queues=WORKER_QUEUES, env=SETTINGS, lease_seconds=3)
    stubs = [_start(f"accept-wq-kill-{n}", n, 1.0, queue="reports") for n in range(5)]
    wait_for(
        lambda: Task.objects.filter(task_type="activity", status="leased").exists(),
        timeout=60,
        message="no activity started",
    )
    first.kill()  # mid-run: the run keeps its slot; its activity's lease expires
    others = [start_worker(queues=WORKER_QUEUES, env=SETTINGS, lease_seconds=3)]
    others.append(start_worker(queues=WORKER_QUEUES, env=SETTINGS, lease_seconds=3))
    _wait_all(stubs)
    assert most_open_and_started([stub.run_id() for stub in stubs]) <= 2
    assert not WorkflowRun.objects.filter(queue_slot="waiting", status="pending").exists()
    assert activity_deliveries([first, *others]) <= 2 * len(stubs) + 4
