"""Processes whose clocks disagree (found by the reliability suite's clock scenario).

A task row carries the ``available_at`` of the process that wrote it. A worker whose
clock is behind that process's sees the task as not due yet when its message arrives.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

import pytest

from durable_workflow import clock, executor
from durable_workflow.models import Task, Timer
from durable_workflow.store import dbclock
from durable_workflow.testing import travel
from tests.integration.helpers import start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_workflow_task_not_due_on_this_clock_waits_for_it(inline):
    stub = start("tests.sequential", "skew-sequential", "Ada")
    task = tasks_of(stub, "workflow")[0]
    sent = inline.sent["workflow"]
    with travel(seconds=-10):  # this worker's clock is 10 s behind the starter's
        # The message is sent again for when the task is due here; nothing is lost
        # (a refuted claim used to escape as an error and its message was acked).
        assert executor.run_workflow_task(task.id) == "early"
    assert Task.objects.get(id=task.id).status == "ready"
    assert inline.sent["workflow"] == sent + 1
    inline.run()
    assert stub.refresh().status() == "completed"


# --- Due decisions in the database's time (issue 28, the reliability suite's clock
# scenario: a worker 10 s ahead fired timers up to 5 s early, one 10 s behind scheduled
# them early). A worker process anchors the engine clock to the database's when it
# registers (``dbclock.follow_database_clock``); these tests do what it does, in a
# process whose machine clock is made wrong with ``clock.skew_system_clock``.


@contextlib.contextmanager
def worker_with_clock_off_by(seconds: float) -> Iterator[None]:
    """This process as a worker whose machine's clock is ``seconds`` off."""
    clock.skew_system_clock(dt.timedelta(seconds=seconds))
    try:
        assert dbclock.follow_database_clock()
        yield
    finally:
        clock.reset()


def _due_timer(stub) -> Task:
    return Task.objects.get(run_id=stub.run_id(), task_type="timer", status="ready")


def test_the_anchored_clock_follows_the_database_and_never_leads_it():
    clock.skew_system_clock(dt.timedelta(seconds=3600))
    assert abs((clock.now() - dbclock.database_now()).total_seconds()) > 3000
    assert dbclock.follow_database_clock()
    engine = clock.now()
    database = dbclock.database_now()
    # The round trip makes it lag, never lead (SQLite's clock reads whole milliseconds).
    assert engine <= database + dt.timedelta(milliseconds=1)
    assert (database - engine).total_seconds() < 1


def test_a_worker_whose_clock_is_ahead_does_not_fire_a_timer_early(inline):
    stub = start("tests.sleeper", "skew-ahead-timer", 60)
    inline.run()  # the timer is scheduled on a correct clock, due in 60 s
    timer = _due_timer(stub)
    with worker_with_clock_off_by(+90):  # its own clock says the timer is 30 s overdue
        assert executor.run_timer_task(timer.id) == "early"
    assert Timer.objects.get(run_id=stub.run_id()).status == "pending"
    assert stub.refresh().status() != "completed"


def test_a_worker_whose_clock_is_behind_schedules_timers_on_the_database_clock(inline):
    stub = start("tests.sleeper", "skew-behind-timer", 60)
    with worker_with_clock_off_by(-90):
        inline.run()
    timer = Timer.objects.get(run_id=stub.run_id())
    delay = (timer.fire_at - dbclock.database_now()).total_seconds()
    assert 55 < delay <= 60  # not 90 s early


def test_a_worker_whose_clock_is_ahead_does_not_take_a_lease_before_it_expires(inline):
    stub = start("tests.sequential", "skew-ahead-lease", "Ada")
    workflow = tasks_of(stub, "workflow")[0]
    Task.objects.filter(id=workflow.id).update(  # held by a live worker for 300 s more
        status="leased",
        lease_owner="elsewhere:1:x",
        lease_generation=1,
        lease_expires_at=dbclock.database_now() + dt.timedelta(seconds=300),
    )
    with worker_with_clock_off_by(+400):
        assert executor.repair_pass().reclaimed == 0
    assert Task.objects.get(id=workflow.id).status == "leased"


def test_a_worker_process_anchors_the_clock_when_it_registers():
    from durable_workflow.transport import worker

    clock.skew_system_clock(dt.timedelta(seconds=3600))
    worker.register(["celery"])
    try:
        assert clock.anchor_age() is not None
        assert abs((clock.now() - dbclock.database_now()).total_seconds()) < 1
    finally:
        worker.deregister()
        clock.reset()
