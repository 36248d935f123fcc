"""Rate limits, per-worker limits and priorities with real Celery workers, Redis and
PostgreSQL (issue 26).

Rates are measured from the attempt rows the engine wrote (their ``started_at`` is the
clock the claim read, the one its rate window counts with), what ran at once on a node
from the begin and end the activity code recorded, and the broker deliveries from the
workers' logs. The limits are upper bounds: nothing here asserts how fast the machine is.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityAttempt, Task
from tests.acceptance.conftest import wait_for
from tests.acceptance.test_celery_worker import assert_history_exactly_once
from tests.acceptance.test_queue_limits_worker import deliveries
from tests.testapp.models import Invocation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _settings(**limits: object) -> dict[str, str]:
    return {"DW_EXTRA_SETTINGS_JSON": json.dumps({"QUEUES": {"limited": limits}})}


def _attempts(activity_type: str = "tests.limited-work") -> list[ActivityAttempt]:
    return list(
        ActivityAttempt.objects.filter(execution__activity_type=activity_type).order_by(
            "started_at"
        )
    )


def most_starts_in_any_window(starts: list[dt.datetime], window: dt.timedelta) -> int:
    """The largest number of starts in any half-open interval of length ``window``."""
    return max(sum(s <= t < s + window for t in starts) for s in starts)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = [(began, 1) for began, _ in intervals] + [(ended, -1) for _, ended in intervals]
    most = running = 0
    for _, step in sorted(edges):  # at a tie, the end (-1) sorts first
        running += step
        most = max(most, running)
    return most


def _run_rate(start_worker, *, rate: str, limit: int, window: dt.timedelta, count: int) -> None:
    env = _settings(rate=rate)
    workers = [start_worker(queues="celery,limited", env=env) for _ in range(3)]
    stub = WorkflowStub.make("tests.fan-out-limited", f"accept-rate-{count}")
    stub.start(count, 0)
    stub.wait(timeout=60 + 3 * count * window.total_seconds() / limit)
    assert stub.status() == "completed", stub.status()
    assert stub.output() == list(range(count))
    assert_history_exactly_once(stub)
    starts = [attempt.started_at for attempt in _attempts()]
    assert len(starts) == count
    # Within 10% (the workers' clocks follow the database's, each from its own anchor).
    assert most_starts_in_any_window(starts, window) <= limit * 1.1, starts
    # No busy loop: a message, a refusal, a re-send for the window; a re-send that came a
    # moment early is put back once more. Never a stream of retries.
    sent = deliveries(workers)
    assert count <= sent <= 3 * count + 5, sent
    assert not Task.objects.filter(queue_wait__isnull=False, status="ready").exists()


def test_a_rate_limit_holds_across_three_workers(start_worker):
    _run_rate(start_worker, rate="10/s", limit=10, window=dt.timedelta(seconds=1), count=45)


@pytest.mark.slow  # a minute and more of starts: `make test-all` (CI)
def test_a_rate_limit_holds_over_a_minute(start_worker):
    _run_rate(start_worker, rate="30/m", limit=30, window=dt.timedelta(minutes=1), count=75)


def test_a_per_worker_limit_holds_on_each_node(start_worker):
    env = _settings(worker_concurrency=2)
    workers = [
        start_worker(queues="celery,limited", env=env, pool="threads", concurrency=4)
        for _ in range(2)
    ]
    count = 16
    stub = WorkflowStub.make("tests.fan-out-limited", "accept-per-worker")
    stub.start(count, 0.4)
    stub.wait(timeout=240)
    assert stub.status() == "completed", stub.status()
    assert stub.output() == list(range(count))
    assert_history_exactly_once(stub)
    attempts = _attempts()
    assert len(attempts) == count
    # The attempt rows' times are read when each claim begins, before it waits for the
    # run's lock, so on a busy machine a claim can be stamped before the end of the
    # attempt whose slot it got. The activity's own begin and end are real moments
    # inside the lease: on one node they may overlap only as the leases did.
    owner_of: dict[int, str] = {}  # the body's index of each activity -> the node that ran it
    for attempt in attempts:  # one process per node (a thread pool): the owner is the node
        assert attempt.closed_at is not None
        owner_of[int(attempt.execution.sequence) - 1] = str(attempt.lease_owner)
    by_owner: dict[str, list[tuple[float, float]]] = {}
    for row in Invocation.objects.filter(name="limited"):
        began, ended = (float(part) for part in row.key.split(":"))
        by_owner.setdefault(owner_of[row.attempt], []).append((began, ended))
    assert sum(len(intervals) for intervals in by_owner.values()) == count
    assert 1 <= len(by_owner) <= 2
    assert all(most_at_once(intervals) <= 2 for intervals in by_owner.values()), by_owner
    sent = deliveries(workers)
    assert count <= sent <= 4 * count, sent


def test_priorities_order_the_waiting_work_of_a_queue(start_worker):
    env = _settings(concurrency=1)
    workers = [start_worker(queues="celery,limited", env=env) for _ in range(3)]
    plug = WorkflowStub.make("tests.plugged", "accept-plug")
    plug.start()
    wait_for(
        lambda: ActivityAttempt.objects.filter(
            execution__activity_type="tests.plug", status="running"
        ).exists(),
        timeout=60,
        message="the plug did not start",
    )
    priorities = [5, 9, 0, 5, 2, 0, 7, 1]
    stub = WorkflowStub.make("tests.fan-out-prioritised", "accept-priorities")
    stub.start(priorities, 0.05)
    wait_for(
        lambda: (
            Task.objects.filter(queue="limited", queue_wait="capacity").count() == len(priorities)
        ),
        timeout=60,
        message="the prioritised work did not all wait behind the plug",
    )
    Invocation.objects.create(name="unplug", key="now", attempt=0)
    stub.wait(timeout=120)
    assert stub.status() == "completed", stub.status()
    assert plug.result(timeout=30) == "unplugged"
    started = [int(a.execution.sequence) for a in _attempts()]
    # The body's order is the sequence order (from 1); priority 0 first, FIFO within one.
    expected = sorted(range(1, len(priorities) + 1), key=lambda s: (priorities[s - 1], s))
    assert started == expected, (started, expected)
    sent = deliveries(workers)
    assert sent <= 2 * (len(priorities) + 1) + 2, sent
