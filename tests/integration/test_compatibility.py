"""Compatibility markers: runs and tasks are stamped; only supporting workers claim.

Each test plays several builds in one process by switching the process's
``COMPATIBILITY_CURRENT`` / ``COMPATIBILITY_SUPPORTED`` (``build(...)``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from durable_workflow import clock, executor
from durable_workflow.models import (
    ActivityAttempt,
    HistoryEvent,
    Task,
    WorkflowRun,
)
from durable_workflow.store import tasks as task_store
from tests.integration.helpers import build, start
from tests.integration.helpers import register_worker as register

pytestmark = pytest.mark.django_db(transaction=True)

A, B = "build-a", "build-b"


def ready(run_id: Any, task_type: str) -> Task:
    return Task.objects.get(run_id=run_id, task_type=task_type, status="ready")


def markers(run_id: Any) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = {}
    for task_type, marker in Task.objects.filter(run_id=run_id).values_list(
        "task_type", "compatibility"
    ):
        found.setdefault(task_type, set()).add(marker)
    return found


def snapshot(run_id: Any) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """Everything a refused claim must leave as it was."""
    run = WorkflowRun.objects.filter(pk=run_id).values().get()
    events = HistoryEvent.objects.filter(run_id=run_id).count()
    rows = list(Task.objects.filter(run_id=run_id).order_by("id").values())
    return run, events, rows


# ----------------------------------------------------------------------------- stamping


def test_runs_and_every_kind_of_task_carry_the_starting_builds_marker(inline):
    with build(A):
        sequential = start("tests.sequential", "compat-seq", "ada")
        retrying = start("tests.retrying", "compat-retry", 2)
        sleeper = start("tests.sleeper", "compat-sleep", 30)
        inline.run()
        clock.advance(dt.timedelta(seconds=31))
        inline.run()
    for stub in (sequential, retrying, sleeper):
        assert stub.refresh().completed(), stub.instance_id
        assert WorkflowRun.objects.get(pk=stub.run_id()).compatibility == A
    assert markers(sequential.run_id()) == {"workflow": {A}, "activity": {A}}
    assert markers(retrying.run_id()) == {"workflow": {A}, "activity": {A}}
    assert Task.objects.filter(run_id=retrying.run_id(), task_type="activity").count() == 2
    assert markers(sleeper.run_id()) == {"workflow": {A}, "timer": {A}}


def test_without_markers_nothing_is_stamped(inline):
    stub = start("tests.sequential", "compat-none", "ada")
    inline.run()
    assert stub.refresh().completed()
    assert WorkflowRun.objects.get(pk=stub.run_id()).compatibility is None
    assert markers(stub.run_id()) == {"workflow": {None}, "activity": {None}}


def test_a_task_created_without_a_marker_copies_its_runs(inline):
    with build(A):
        stub = start("tests.approval", "compat-default", "signal")
    task = task_store.create_task(
        run_id=WorkflowRun.objects.get(pk=stub.run_id()).pk,
        namespace="default",
        task_type="workflow",
        available_at=clock.now(),
        queue=None,
        connection=None,
        now=clock.now(),
    )
    assert task.compatibility == A
    assert Task.objects.get(pk=task.id).compatibility == A


def test_a_child_gets_the_marker_of_the_worker_that_starts_it(inline):
    with build(A):
        parent = start("tests.parent", "compat-parent", "simple")
    with build(B, B, A):  # the new build, still running old runs
        inline.run()
    assert parent.refresh().completed()
    child = WorkflowRun.objects.get(parent_run_id=parent.run_id())
    assert WorkflowRun.objects.get(pk=parent.run_id()).compatibility == A
    assert child.compatibility == B
    assert markers(parent.run_id())["workflow"] == {A}
    assert markers(child.pk) == {"workflow": {B}, "activity": {B}}


def test_continue_as_new_carries_the_marker_forward(inline):
    with build(A):
        stub = start("tests.looper", "compat-looper", 2)
    with build(B, B, A):
        inline.run()
        stub.signal("tick")
        inline.run()
    first, second = WorkflowRun.objects.filter(instance_id="compat-looper").order_by("run_number")
    assert first.closed_reason == "continued"
    assert second.compatibility == A
    assert markers(second.pk)["workflow"] == {A}


# ------------------------------------------------------------------------------ fencing


def test_an_incompatible_worker_does_not_claim_a_workflow_task(inline):
    with build(A):
        stub = start("tests.sequential", "compat-wf", "ada")
    task = ready(stub.run_id(), "workflow")
    before = snapshot(stub.run_id())
    with build(B):
        assert executor.run_workflow_task(task.id) == "incompatible"
    assert snapshot(stub.run_id()) == before  # no lease, no event, no write at all
    with build(A):
        assert executor.run_workflow_task(task.id) == "completed"
    assert Task.objects.get(pk=task.id).status == "completed"


def test_an_incompatible_worker_does_not_claim_an_activity_task(inline):
    with build(A):
        stub = start("tests.sequential", "compat-act", "ada")
        executor.run_workflow_task(ready(stub.run_id(), "workflow").id)
    task = ready(stub.run_id(), "activity")
    before = snapshot(stub.run_id())
    with build(B):
        assert executor.run_activity_task(task.id) == "skipped"
    assert snapshot(stub.run_id()) == before
    assert not ActivityAttempt.objects.filter(execution__run_id=stub.run_id()).exists()
    with build(A):
        assert executor.run_activity_task(task.id) == "completed"
    started = HistoryEvent.objects.get(run_id=stub.run_id(), event_type="ActivityStarted")
    assert started.payload["lease_owner"] == Task.objects.get(pk=task.id).lease_owner


def test_an_incompatible_worker_does_not_fire_a_timer(inline):
    with build(A):
        stub = start("tests.sleeper", "compat-timer", 60)
        inline.run()
    task = ready(stub.run_id(), "timer")
    with build(B):
        assert executor.run_timer_task(task.id) == "early"  # not due: only re-armed
        clock.advance(dt.timedelta(seconds=61))
        before = snapshot(stub.run_id())
        assert executor.run_timer_task(task.id) == "incompatible"
        assert snapshot(stub.run_id()) == before
    with build(A):
        assert executor.run_timer_task(task.id) == "fired"
        inline.run()
    assert stub.refresh().completed()


def test_unmarked_tasks_are_claimed_by_any_worker(inline):
    stub = start("tests.sequential", "compat-unmarked", "ada")
    with build(B):
        inline.run()
    assert stub.refresh().completed()


def test_a_wildcard_worker_claims_every_marker(inline):
    with build(A):
        first = start("tests.sequential", "compat-star-a", "ada")
    with build(B):
        second = start("tests.sleeper", "compat-star-b", 0)
    with build(None, "*"):
        inline.run()
    assert first.refresh().completed() and second.refresh().completed()


def test_the_supported_list_replaces_the_current_marker(inline):
    with build(A):
        stub = start("tests.sequential", "compat-list", "ada")
    with build(B, "build-c"):  # supports build-c only, not even its own build-b
        assert inline.run() == 0
    with build(B, "build-c", A):
        inline.run()
    assert stub.refresh().completed()


def test_the_inline_runner_leaves_foreign_tasks_ready(inline):
    with build(A):
        stub = start("tests.sequential", "compat-inline", "ada")
    with build(B):
        assert inline.run() == 0
    assert ready(stub.run_id(), "workflow").lease_owner is None


# -------------------------------------------------------------------- hand-back, repair


def test_a_refused_message_is_handed_back_when_a_live_worker_supports_it(inline):
    with build(A):
        stub = start("tests.sequential", "compat-handback", "ada")
    task = ready(stub.run_id(), "workflow")
    register("old-worker", [A])
    clock.freeze(clock.now() + dt.timedelta(seconds=5))
    sent = inline.sent["workflow"]
    with build(B):
        assert executor.run_workflow_task(task.id) == "incompatible"
    assert inline.sent["workflow"] == sent + 1
    row = Task.objects.get(pk=task.id)
    assert (row.status, row.lease_owner, row.attempt_count) == ("ready", None, 0)
    assert row.last_dispatched_at == clock.now()  # the repair pass need not re-send yet


@pytest.mark.parametrize(
    "queues, stale, handed_back",
    [
        (["payments"], False, False),  # the supporter does not consume the task's queue
        (["workflows"], False, True),
        ([], False, True),  # a prefork child registers no queues: it may consume it
        (["workflows"], True, False),  # the supporter stopped heartbeating
    ],
)
def test_hand_back_only_to_a_live_supporter_of_the_queue(inline, queues, stale, handed_back):
    with build(A, DEFAULT_QUEUE="workflows"):
        stub = start("tests.sequential", "compat-no-handback", "ada")
    task = ready(stub.run_id(), "workflow")
    register("old-worker", [A], queues=queues)
    clock.advance(dt.timedelta(minutes=5 if stale else 0, seconds=1))
    before = Task.objects.get(pk=task.id).last_dispatched_at
    sent = inline.sent["workflow"]
    with build(B):
        assert executor.run_workflow_task(task.id) == "incompatible"
    assert inline.sent["workflow"] == sent + (1 if handed_back else 0)
    moved = Task.objects.get(pk=task.id).last_dispatched_at != before
    assert moved is handed_back


def test_repair_redispatches_a_task_it_cannot_claim(inline):
    with build(A):
        stub = start("tests.sequential", "compat-repair", "ada")
    task = ready(stub.run_id(), "workflow")
    clock.advance(dt.timedelta(seconds=10))
    sent = inline.sent["workflow"]
    with build(B):
        report = executor.repair_pass()
    assert report.redispatched == 1
    assert inline.sent["workflow"] == sent + 1
    row = Task.objects.get(pk=task.id)
    assert (row.status, row.lease_owner, row.dispatch_count) == ("ready", None, 2)
    with build(A):
        inline.run()
    assert stub.refresh().completed()
