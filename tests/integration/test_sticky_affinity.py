"""Sticky routing: owners, inherited affinity, replay modes, holding and forwarding."""

from __future__ import annotations

import datetime as dt

import pytest
from django.conf import settings
from django.test import override_settings

from durable_workflow import clock
from durable_workflow.executor import activity_task, dispatch, routing, settlement, sticky
from durable_workflow.executor.identity import set_registered_worker_id
from durable_workflow.executor.workflow_task import run_workflow_task
from durable_workflow.models import Task, WorkflowRun
from durable_workflow.transport import worker as worker_transport
from tests.integration.helpers import Recorder, register_worker, start

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 300


def register(worker_id: str) -> None:
    register_worker(worker_id)


@pytest.fixture
def fleet():
    """Two registered workers; ``fleet.be(name)`` makes this process act as one of them."""
    clock.freeze()
    routing.forget()
    sticky.cache.clear()
    recorder = Recorder()
    previous = dispatch.set_backend(recorder)
    saved = dict(worker_transport._state)

    class Fleet:
        sent = recorder.sent

        @staticmethod
        def be(worker_id: str | None) -> None:
            direct = f"dw.direct.{worker_id}" if worker_id else None
            set_registered_worker_id(worker_id, direct_queue=direct)
            worker_transport._state.update(worker_id=worker_id, direct_queue=direct)

    register("w1")
    register("w2")
    yield Fleet
    Fleet.be(None)
    worker_transport._state.clear()
    worker_transport._state.update(saved)
    dispatch.set_backend(previous)
    sticky.cache.clear()
    routing.forget()
    clock.reset()


def workflow_task(stub) -> Task:
    return Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")


def run_activity(stub) -> None:
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    lease = activity_task._claim(task.id)
    settlement.settle(lease, *activity_task._invoke(lease))


def test_the_worker_keeping_the_run_warm_becomes_its_owner(fleet):
    fleet.be("w1")
    stub = start("tests.sequential", "aff-1", "ada")
    first = workflow_task(stub)
    assert first.sticky_worker_id is None  # a new run has no owner yet
    assert run_workflow_task(first.id) == "completed"
    first.refresh_from_db()
    assert first.sticky_replay_mode == "cold_replay" and first.sticky_claimed_at == clock.now()
    run = WorkflowRun.objects.get(pk=stub.run_id())
    assert run.sticky_worker_id == "w1"
    assert run.sticky_until == clock.now() + dt.timedelta(seconds=TTL)

    fleet.be("w2")  # the activity ran elsewhere; its result wakes the run
    fleet.sent.clear()
    run_activity(stub)
    follow_up = workflow_task(stub)
    assert (follow_up.sticky_worker_id, follow_up.sticky_until) == ("w1", run.sticky_until)
    assert ("workflow", "dw.direct.w1", None) in fleet.sent  # not run eagerly on w2

    fleet.be("w1")
    hits = sticky.cache.stats.hits
    assert run_workflow_task(follow_up.id) == "completed"
    follow_up.refresh_from_db()
    assert follow_up.sticky_replay_mode == "sticky_hit_expected"
    assert sticky.cache.stats.hits == hits + 1


def test_another_live_worker_holds_off_and_forwards_to_the_owner(fleet):
    fleet.be("w1")
    stub = start("tests.sequential", "aff-2", "ada")
    run_workflow_task(workflow_task(stub).id)
    run_activity(stub)
    fleet.be("w2")  # the follow-up's message reached another worker (e.g. a re-send)
    task = workflow_task(stub)
    fleet.sent.clear()
    assert run_workflow_task(task.id) == "held"
    task.refresh_from_db()
    assert task.status == "ready" and task.lease_owner is None
    assert fleet.sent == [("workflow", "dw.direct.w1", None)]


def test_expired_or_stale_affinity_is_claimed_by_anyone_and_replayed_cold(fleet):
    fleet.be("w1")
    stub = start("tests.sequential", "aff-3", "ada")
    run_workflow_task(workflow_task(stub).id)
    fleet.be("w2")
    run_activity(stub)
    clock.advance(dt.timedelta(seconds=TTL + 1))
    register("w2")
    register("w1")
    routing.forget()
    task = workflow_task(stub)
    assert run_workflow_task(task.id) == "completed"
    task.refresh_from_db()
    assert task.sticky_replay_mode == "forced_cold_replay" and task.lease_owner == "w2"
    assert WorkflowRun.objects.get(pk=stub.run_id()).sticky_worker_id == "w2"  # new owner

    other = start("tests.sequential", "aff-4", "bob")
    run_workflow_task(workflow_task(other).id)  # w2 owns it
    fleet.be("w1")
    run_activity(other)
    clock.advance(dt.timedelta(seconds=31))  # w2 falls silent; w1 keeps beating
    register("w1")
    routing.forget()
    task = workflow_task(other)
    assert run_workflow_task(task.id) == "completed"
    task.refresh_from_db()
    assert task.sticky_replay_mode == "forced_cold_replay" and task.lease_owner == "w1"


def test_disabled_sticky_writes_no_affinity(fleet):
    fleet.be("w1")
    engine = {**settings.DURABLE_WORKFLOW, "STICKY_ENABLED": False}
    with override_settings(DURABLE_WORKFLOW=engine):
        stub = start("tests.sequential", "aff-5", "ada")
        run_workflow_task(workflow_task(stub).id)
        run_activity(stub)
        run = WorkflowRun.objects.get(pk=stub.run_id())
        assert run.sticky_worker_id is None and run.sticky_until is None
        modes = set(
            Task.objects.filter(run_id=stub.run_id(), task_type="workflow")
            .exclude(sticky_replay_mode=None)
            .values_list("sticky_replay_mode", flat=True)
        )
        assert modes == {"cold_replay"}


def test_a_process_that_is_not_a_worker_clears_the_affinity(fleet, inline):
    fleet.be("w1")
    dispatch.set_backend(Recorder())
    stub = start("tests.sequential", "aff-6", "ada")
    first = workflow_task(stub)
    run_workflow_task(first.id)
    fleet.be(None)
    dispatch.set_backend(inline)
    inline.run()
    run = WorkflowRun.objects.get(pk=stub.run_id())
    assert run.status == "completed" and run.sticky_worker_id is None
    # The clock is frozen, so the three workflow tasks share one created_at: ordered by
    # it, they come back in the table's physical order, which earlier tests' dead rows
    # can shuffle on PostgreSQL. Each later task is known by the affinity it inherited.
    later = Task.objects.filter(run_id=stub.run_id(), task_type="workflow").exclude(pk=first.pk)
    first.refresh_from_db()
    assert (first.sticky_worker_id, first.sticky_replay_mode) == (None, "cold_replay")
    modes = later.values_list("sticky_worker_id", "sticky_replay_mode")
    assert sorted(modes, key=lambda row: row[0] or "") == [
        (None, "cold_replay"),  # created after this process cleared the affinity
        ("w1", "forced_cold_replay"),  # created while w1 owned the run; replayed here
    ]


def test_operator_metrics_report_owners_and_replay_modes(fleet):
    from durable_workflow.operations import schemas
    from durable_workflow.operations.metrics import operator_metrics

    fleet.be("w1")
    stub = start("tests.sequential", "aff-7", "ada")
    run_workflow_task(workflow_task(stub).id)  # cold, and w1 becomes the owner
    run_activity(stub)
    run_workflow_task(workflow_task(stub).id)  # a hit
    fleet.be("w2")
    run_activity(stub)
    assert run_workflow_task(workflow_task(stub).id) == "held"
    snapshot = operator_metrics()
    schemas.validate(snapshot, schemas.OPERATOR_METRICS)
    block = snapshot["sticky_execution"]
    assert block["active_sticky_runs"] == 1 and block["ready_sticky_tasks"] == 1
    assert block["hit_expected_last_minute"] == 1 and block["cold_replay_last_minute"] == 1
    assert block["hit_rate_last_minute"] == 0.5 and block["miss_rate_last_minute"] == 0.5
    assert snapshot["worker_sessions"]["total"] == 0
