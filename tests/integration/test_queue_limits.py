"""Named work queues with a fleet-wide concurrency limit (issue 26), at the claim.

The claim is driven step by step here (no broker): which claims are refused, what a
refused task looks like, who sends it again and when. Real workers on a real broker:
``tests/acceptance/test_queue_limits_worker.py``.
"""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import ConfigurationError, WorkflowStub, clock, executor
from durable_workflow.conf import get_settings
from durable_workflow.executor import activity_task, queue_gate
from durable_workflow.models import Task, TaskStatus, TaskType
from durable_workflow.store import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def limited(settings):
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "QUEUES": {"limited": {"concurrency": 2}},
    }
    yield


def _fan_out(inline, instance_id: str, count: int) -> WorkflowStub:
    stub = WorkflowStub.make("tests.fan-out-limited", instance_id)
    stub.start(count, 0)
    workflow_task = Task.objects.get(run_id=stub.run_id(), task_type=TaskType.WORKFLOW)
    executor.run_workflow_task(workflow_task.id)
    inline.sent.clear()
    return stub


def _activity_tasks(stub: WorkflowStub) -> list[Task]:
    return list(
        Task.objects.filter(run_id=stub.run_id(), task_type=TaskType.ACTIVITY).order_by(
            "activity_execution__sequence"  # the order waiters are sent in
        )
    )


def test_claims_past_the_limit_wait_without_a_message(inline, limited):
    stub = _fan_out(inline, "limit-1", 4)
    found = _activity_tasks(stub)
    assert [t.queue for t in found] == ["limited"] * 4
    leases = [activity_task._claim(task.id) for task in found]
    assert [lease is not None for lease in leases] == [True, True, False, False]
    waiting = Task.objects.filter(queue_wait="capacity", status=TaskStatus.READY)
    assert {t.id for t in waiting} == {found[2].id, found[3].id}
    # Nothing sends a waiting task but the engine: not the inline drain, not repair.
    assert {t.id for t in tasks.ready_and_due(now=clock.now(), limit=10)}.isdisjoint(
        {found[2].id, found[3].id}
    )
    clock.advance(dt.timedelta(seconds=60))
    assert executor.repair_pass().redispatched == 0
    assert inline.sent == {}
    # A waiting task claimed again (a duplicate message) is refused again, harmlessly.
    assert activity_task._claim(found[2].id) is None


def test_a_finished_attempt_sends_one_waiting_task_per_free_slot(inline, limited):
    stub = _fan_out(inline, "limit-2", 5)
    found = _activity_tasks(stub)
    leases = [activity_task._claim(task.id) for task in found]
    assert sum(lease is not None for lease in leases) == 2
    first = leases[0]
    assert first is not None
    activity_task.run_claimed(first)
    assert queue_gate.wake("limited") == 1  # one slot freed: the oldest waiter goes
    assert inline.sent["activity"] == 1  # (and the workflow task the result woke)
    assert Task.objects.get(id=found[2].id).queue_wait == "woken"
    assert queue_gate.wake("limited") == 0  # the woken one holds that slot until claimed
    third = activity_task._claim(found[2].id)
    assert third is not None
    assert Task.objects.get(id=found[2].id).queue_wait is None
    for lease in (leases[1], third):
        assert lease is not None
        activity_task.run_claimed(lease)
    assert queue_gate.wake("limited") == 2
    inline.run()  # each attempt that ends here sends the next waiter
    assert WorkflowStub.load("limit-2").status() == "completed"
    assert WorkflowStub.load("limit-2").output() == [0, 1, 2, 3, 4]
    assert not Task.objects.filter(queue_wait__isnull=False).exclude(status="completed").exists()


def test_the_repair_pass_sends_waiters_when_leases_expire(inline, limited):
    stub = _fan_out(inline, "limit-3", 3)
    found = _activity_tasks(stub)
    leases = [activity_task._claim(task.id) for task in found]
    assert [lease is not None for lease in leases] == [True, True, False]
    # The two holders die: their leases expire, the repair pass takes them back.
    clock.advance(dt.timedelta(seconds=get_settings().ACTIVITY_LEASE_SECONDS + 1))
    report = executor.repair_pass()
    assert report.reclaimed == 2
    assert Task.objects.get(id=found[2].id).queue_wait == "woken"
    inline.run()
    assert WorkflowStub.load("limit-3").status() == "completed"


def test_the_wait_is_visible_in_describe(inline, limited):
    stub = _fan_out(inline, "limit-4", 3)
    for task in _activity_tasks(stub):
        activity_task._claim(task.id)
    waiting = Task.objects.get(queue_wait="capacity").activity_execution_id
    waits = {w.activity_execution_id: w for w in stub.describe().waiting_on if w.kind == "activity"}
    assert waits.pop(str(waiting)).summary == 'waiting for capacity on queue "limited"'
    assert [w.waiting_for_queue for w in waits.values()] == [None, None]


def test_an_unlimited_queue_is_not_gated(inline):
    stub = _fan_out(inline, "limit-5", 4)
    assert all(activity_task._claim(task.id) for task in _activity_tasks(stub))


@pytest.mark.parametrize(
    "queues",
    [
        [],
        {"q": 3},
        {"q": {"concurrency": 0}},
        {"q": {"concurrency": True}},
        {"q": {"concurency": 3}},
        {"": {"concurrency": 1}},
        {"bad\nname": {"concurrency": 1}},
    ],
)
def test_bad_queue_declarations_are_refused(settings, queues):
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": queues}
    with pytest.raises(ConfigurationError, match="QUEUES"):
        get_settings()


def test_the_doctor_reports_limits_usage_and_waiters(inline, limited):
    from durable_workflow.operations import schemas
    from durable_workflow.operations.doctor import DoctorContext, report, run_checks

    stub = _fan_out(inline, "limit-6", 3)
    for task in _activity_tasks(stub):
        activity_task._claim(task.id)
    clock.advance(dt.timedelta(hours=1))  # long past the stuck threshold; leases expired
    ctx = DoctorContext(active_queues=lambda connection: {})
    document = report(run_checks(ctx), now=ctx.now)
    schemas.validate(document, schemas.DOCTOR)
    checks = {c["id"]: c for c in document["checks"]}
    found = checks["queue_limits"]
    assert found["details"] == {
        "limited": {
            "concurrency": 2,
            "rate": None,
            "rate_limit": None,
            "rate_period_seconds": None,
            "worker_concurrency": None,
            "leased": 0,
            "waiting": 1,
            "waiting_by_reason": {"concurrency": 1, "rate": 0, "worker_concurrency": 0},
            "woken": 0,
            "rate_starts_in_window": None,
        }
    }
    # The leases expired and nobody ran the repair pass: a free slot beside a waiter.
    assert found["status"] == "warning" and "repair" in found["next_step"]
    assert 'queue "limited": 0/2 leased, 1 waiting' in found["message"]
    stuck = checks["stuck_tasks"]
    assert "1 ready" not in stuck["message"]  # the waiter is not reported as stuck


def test_the_admin_says_what_the_activity_waits_for(inline, limited):
    from durable_workflow.admin.triage import triage
    from durable_workflow.models import WorkflowRun

    stub = _fan_out(inline, "limit-7", 3)
    for task in _activity_tasks(stub):
        activity_task._claim(task.id)
    run = WorkflowRun.objects.get(id=stub.run_id())
    words = [w for _, w in triage([run])[run.pk].waits]
    assert sum('waiting for capacity on queue "limited"' in w for w in words) == 1
