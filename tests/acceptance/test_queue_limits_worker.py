"""A fleet-wide queue limit with real Celery workers, Redis and PostgreSQL (issue 26).

What is measured: the attempts leased at once (sampled from the attempt rows while the
workers run, and from the intervals the activity code itself recorded), and the
broker deliveries of activity messages (the workers' ``received`` log lines). Nothing
here depends on how fast the machine is: the bounds hold whatever the timing.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from django.db import connections

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt, Task
from tests.acceptance.conftest import wait_for
from tests.acceptance.test_celery_worker import assert_history_exactly_once
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

LIMIT = 3
SETTINGS = {"DW_EXTRA_SETTINGS_JSON": json.dumps({"QUEUES": {"limited": {"concurrency": LIMIT}}})}
RECEIVED = re.compile(r"Task durable_workflow\.activity_task\[[0-9a-f-]+\] received")


class LeaseSampler:
    """Counts running attempts of the limited activity, over and over, in a thread."""

    def __init__(self) -> None:
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LeaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                running = ActivityAttempt.objects.filter(
                    execution__activity_type="tests.limited-work", status="running"
                ).count()
                self.most = max(self.most, running)
                self.samples += 1
                time.sleep(0.01)
        finally:
            connections.close_all()


def most_at_once_in_code() -> int:
    """The largest number of activity bodies that ran at the same moment."""
    edges = []
    for row in Invocation.objects.filter(name="limited"):
        began, ended = (float(part) for part in row.key.split(":"))
        edges += [(began, 1), (ended, -1)]
    most = running = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):  # ends first
        running += step
        most = max(most, running)
    return most


def deliveries(workers) -> int:
    return sum(len(RECEIVED.findall(worker.output())) for worker in workers)


def test_a_limit_of_three_holds_across_three_workers(start_worker):
    workers = [start_worker(queues="celery,limited", env=SETTINGS) for _ in range(3)]
    count = 12
    stub = WorkflowStub.make("tests.fan-out-limited", "accept-limit-3")
    with LeaseSampler() as sampler:
        stub.start(count, 0.3)
        stub.wait(timeout=180)
    assert stub.status() == "completed", stub.status()
    assert stub.output() == list(range(count))
    assert_history_exactly_once(stub)
    assert sampler.samples > 0
    assert sampler.most <= LIMIT, sampler.most
    assert most_at_once_in_code() <= LIMIT
    assert Invocation.objects.filter(name="limited").count() == count
    # No busy loop: a message refused for capacity is one delivery, and the engine sends
    # the task once more when a slot frees; never a stream of re-tries.
    sent = deliveries(workers)
    assert count <= sent <= 2 * count + 2, sent
    assert not Task.objects.filter(queue_wait__isnull=False, status="ready").exists()


@pytest.mark.slow  # a lease to expire and the repair pass to notice: `make test-all` (CI)
def test_a_limited_queue_drains_after_a_worker_is_killed_mid_attempt(start_worker):
    first = start_worker(queues="celery,limited", env=SETTINGS, lease_seconds=3)
    count = 8
    stub = WorkflowStub.make("tests.fan-out-limited", "accept-limit-kill")
    stub.start(count, 1.0)
    wait_for(
        lambda: ActivityAttempt.objects.filter(
            execution__activity_type="tests.limited-work", status="running"
        ).exists(),
        timeout=60,
        message="no limited attempt started",
    )
    first.kill()  # mid-attempt: its lease holds a slot until it expires
    others = [start_worker(queues="celery,limited", env=SETTINGS, lease_seconds=3)]
    others.append(start_worker(queues="celery,limited", env=SETTINGS, lease_seconds=3))
    stub.wait(timeout=180)
    assert stub.status() == "completed", stub.status()
    assert stub.output() == list(range(count))
    assert_history_exactly_once(stub)
    assert most_at_once_in_code() <= LIMIT
    statuses = ActivityAttempt.objects.filter(
        execution__activity_type="tests.limited-work"
    ).values_list("status", flat=True)
    assert sorted(set(statuses)) in (["completed"], ["completed", "expired"])
    assert list(statuses).count("completed") == count
    assert deliveries([first, *others]) <= 2 * count + 4
