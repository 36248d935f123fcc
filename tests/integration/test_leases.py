"""Leases, fencing, repair and races between workers."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from durable_workflow import clock, executor
from durable_workflow.executor import activity_task, settlement
from durable_workflow.models import ActivityAttempt, HistoryEvent, Task
from durable_workflow.store import database, runs
from tests.engine_db import connection
from tests.integration.helpers import event_types, start, tasks_of
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def ready(stub, task_type):
    return Task.objects.get(run_id=stub.run_id(), task_type=task_type, status="ready")


def test_stale_attempt_cannot_settle_after_lease_expiry(inline):
    stub = start("tests.sequential", "stale-1", "ada")
    executor.run_workflow_task(ready(stub, "workflow").id)
    task = ready(stub, "activity")
    old = activity_task._claim(task.id)  # attempt 1 claims, then "hangs"
    assert old is not None

    clock.advance(dt.timedelta(seconds=301))  # the lease (300 s) runs out
    report = executor.repair_pass()
    assert report.reclaimed == 1
    attempt1 = ActivityAttempt.objects.get(id=old.attempt_id)
    assert attempt1.status == "expired"

    assert executor.run_activity_task(task.id) == "completed"  # attempt 2 finishes
    ok, value = activity_task._invoke(old)  # attempt 1 wakes up and reports late
    assert ok
    assert settlement.settle(old, ok, value) == "stale"
    types = event_types(stub)
    assert types.count("ActivityCompleted") == 1
    assert types.count("ActivityStarted") == 2
    inline.run()
    assert stub.refresh().output() == ["hello ada", 3]


def test_stale_attempt_is_rejected_before_the_new_one_settles(inline):
    stub = start("tests.sequential", "stale-2", "ada")
    executor.run_workflow_task(ready(stub, "workflow").id)
    task = ready(stub, "activity")
    old = activity_task._claim(task.id)
    clock.advance(dt.timedelta(seconds=301))
    executor.repair_pass()
    new = activity_task._claim(task.id)
    assert new is not None and new.generation == old.generation + 1
    assert settlement.settle(old, True, {"codec": "avro", "blob": "wwHioz3/VYAiNwA="}) == ("stale")
    assert settlement.settle(new, *activity_task._invoke(new)) == "completed"
    assert settlement.settle(new, *activity_task._invoke(new)) == "stale"  # duplicate report
    assert event_types(stub).count("ActivityCompleted") == 1


def test_duplicate_message_for_a_settled_task_is_a_no_op(inline):
    stub = start("tests.sequential", "dup-msg", "ada")
    wf = ready(stub, "workflow")
    assert executor.run_workflow_task(wf.id) == "completed"
    assert executor.run_workflow_task(wf.id) == "skipped"
    act = ready(stub, "activity")
    assert executor.run_activity_task(act.id) == "completed"
    assert executor.run_activity_task(act.id) == "skipped"
    assert Invocation.objects.count() == 1


def test_repair_resends_a_lost_message_after_the_redispatch_delay(inline):
    start("tests.sequential", "lost-1", "ada")
    assert inline.sent["workflow"] == 1
    assert executor.repair_pass().redispatched == 0  # too soon: the message may be in flight
    clock.advance(dt.timedelta(seconds=2))
    assert executor.repair_pass().redispatched == 1
    assert inline.sent["workflow"] == 2
    clock.advance(dt.timedelta(seconds=1.5))
    assert executor.repair_pass().redispatched == 0  # backs off: the next wait is 2 s
    clock.advance(dt.timedelta(seconds=1))
    assert executor.repair_pass().redispatched == 1


def _race(target, *args):
    results, errors = [], []
    barrier = threading.Barrier(len(args))

    def work(arg):
        try:
            barrier.wait()
            results.append(target(arg))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(arg,)) for arg in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return sorted(results)


def test_two_workers_racing_one_workflow_task(inline):
    stub = start("tests.sequential", "race-1", "ada")
    task = ready(stub, "workflow")
    assert _race(executor.run_workflow_task, task.id, task.id, task.id) == [
        "completed",
        "skipped",
        "skipped",
    ]
    assert event_types(stub).count("ActivityScheduled") == 1
    assert len(tasks_of(stub, "activity")) == 1


def test_two_workers_racing_one_activity_task(inline):
    stub = start("tests.sequential", "race-2", "ada")
    executor.run_workflow_task(ready(stub, "workflow").id)
    task = ready(stub, "activity")
    assert _race(executor.run_activity_task, task.id, task.id) == ["completed", "skipped"]
    assert Invocation.objects.count() == 1
    assert event_types(stub).count("ActivityCompleted") == 1


def test_racing_workflow_tasks_of_many_runs_write_no_duplicates(inline):
    stubs = [start("tests.many-steps", f"race-many-{i}", 4) for i in range(4)]

    def drain(_):
        from durable_workflow.testing.inline import run_ready_tasks

        return run_ready_tasks()

    _race(drain, 1, 2, 3)
    inline.run()
    for stub in stubs:
        assert stub.refresh().output() == 6
        sequences = list(
            HistoryEvent.objects.filter(run_id=stub.run_id()).values_list("sequence", flat=True)
        )
        assert sequences == list(range(1, len(sequences) + 1))
    assert Invocation.objects.count() == 16


def wait_until_a_session_waits_for_a_lock(timeout: float = 30.0) -> None:
    """Return once another PostgreSQL session is blocked on a lock (observed, not slept).

    SQLite runs a whole transaction under its write lock, so a settle there cannot have
    read anything before waiting: whenever it starts, the outcome is the same.
    """
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, "the settle never waited for the run lock"
            time.sleep(0.01)


def test_a_result_that_waited_for_the_run_lock_still_wakes_the_workflow(inline):
    """A settle that had to wait for the run lock must look for a waiting workflow task
    only once it holds the lock: the one it could see before may have run meanwhile."""
    stub = start("tests.fanout", "race-wake", 2)
    executor.run_workflow_task(ready(stub, "workflow").id)
    first, second = tasks_of(stub, "activity")
    assert executor.run_activity_task(first.id) == "completed"  # a workflow task is ready
    waiting = ready(stub, "workflow")
    lease = activity_task._claim(second.id)
    ok, value = activity_task._invoke(lease)
    locked, release = threading.Event(), threading.Event()

    def another_worker_runs_the_workflow_task():
        try:
            with database.atomic():
                runs.lock_run(stub.run_id())
                locked.set()
                release.wait(10)
                Task.objects.filter(id=waiting.id).update(status="completed")
        finally:
            connection.close()

    def settle():
        try:
            outcomes.append(settlement.settle(lease, ok, value))
        finally:
            connection.close()

    outcomes: list[str] = []
    holder = threading.Thread(target=another_worker_runs_the_workflow_task)
    holder.start()
    assert locked.wait(10)
    settling = threading.Thread(target=settle)
    settling.start()
    wait_until_a_session_waits_for_a_lock()
    release.set()
    holder.join()
    settling.join()
    assert outcomes == ["completed"]
    assert Task.objects.filter(run_id=stub.run_id(), task_type="workflow", status="ready").exists()
    inline.run()
    assert stub.refresh().status() == "completed"
