"""Rate limits, per-worker limits and priorities of named work queues (issue 26), at the
claim, driven step by step with the engine's clock frozen (no broker). Real workers:
``tests/acceptance/test_queue_rates_worker.py``."""

from __future__ import annotations

import datetime as dt
import types

import pytest

from durable_workflow import ActivityOptions, ConfigurationError, WorkflowStub, clock, executor
from durable_workflow.conf import get_settings
from durable_workflow.executor import activity_task, identity, queue_gate
from durable_workflow.models import ActivityAttempt, Task, TaskStatus, TaskType, WorkQueueStart
from durable_workflow.queue_limits import parse, parse_rate

pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)


def _limit(settings, **limits):
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {"limited": limits}}


def _fan_out(inline, instance_id: str, count: int) -> list[Task]:
    stub = WorkflowStub.make("tests.fan-out-limited", instance_id)
    stub.start(count, 0)
    return _scheduled(inline, stub)


def _scheduled(inline, stub: WorkflowStub) -> list[Task]:
    workflow_task = Task.objects.get(run_id=stub.run_id(), task_type=TaskType.WORKFLOW)
    executor.run_workflow_task(workflow_task.id)
    inline.sent.clear()
    return list(
        Task.objects.filter(run_id=stub.run_id(), task_type=TaskType.ACTIVITY).order_by(
            "activity_execution__sequence"
        )
    )


def _wait(task: Task) -> tuple[str | None, dt.datetime]:
    row = Task.objects.get(id=task.id)
    return row.queue_wait, row.available_at


@pytest.fixture
def frozen():
    clock.freeze(T0)
    yield T0


def test_a_rate_limit_refuses_starts_past_it_and_sends_one_ahead_for_the_window(
    inline, settings, frozen
):
    _limit(settings, rate="2/10s")
    found = _fan_out(inline, "rate-1", 5)
    # New tasks of a limited queue get no message of their own: the wake after the
    # workflow task's commit sent as many as the window has room for.
    assert [_wait(task)[0] for task in found] == ["woken", "woken", "rate", "rate", "rate"]
    claims = [activity_task._claim(task.id) for task in found[:2]]
    assert all(lease is not None for lease in claims)
    assert WorkQueueStart.objects.filter(queue="limited").count() == 2
    # One waiter is sent ahead, due when the window opens; the others wait, no message.
    assert _wait(found[2]) == ("woken", T0 + dt.timedelta(seconds=10))
    assert _wait(found[3])[0] == _wait(found[4])[0] == "rate"
    assert inline.sent["activity"] == 1
    # A stray message for a waiter is refused, and sends nothing more.
    assert activity_task._claim(found[3].id) is None
    assert _wait(found[3])[0] == "rate" and inline.sent["activity"] == 1
    waits = {
        w.activity_execution_id: w
        for w in WorkflowStub.load("rate-1").describe().waiting_on
        if w.kind == "activity" and w.waiting_for_queue
    }
    assert {w.waiting_reason for w in waits.values()} == {"rate"}
    assert {w.summary for w in waits.values()} == {
        'waiting for capacity on queue "limited" (rate limit)'
    }
    # Early, the one sent ahead is not claimed: its message is put back with the rest
    # of its countdown (a broker countdown that ran short).
    clock.freeze(T0 + dt.timedelta(seconds=9))
    assert activity_task._claim(found[2].id) is None
    assert _wait(found[2])[0] == "woken"
    # The window opens: it starts, and the slot the other start freed goes to the next.
    clock.freeze(T0 + dt.timedelta(seconds=10))
    assert activity_task._claim(found[2].id) is not None
    assert _wait(found[3])[0] == "woken"  # due now
    assert activity_task._claim(found[3].id) is not None
    assert _wait(found[4]) == ("woken", T0 + dt.timedelta(seconds=20))


def test_a_rate_limit_holds_in_every_window_while_the_queue_drains(inline, settings, frozen):
    _limit(settings, rate="3/5s")
    _fan_out(inline, "rate-2", 14)
    for _ in range(200):
        inline.run()
        if WorkflowStub.load("rate-2").status() == "completed":
            break
        clock.advance(dt.timedelta(milliseconds=500))
    assert WorkflowStub.load("rate-2").output() == list(range(14))
    starts = sorted(
        ActivityAttempt.objects.filter(execution__activity_type="tests.limited-work").values_list(
            "started_at", flat=True
        )
    )
    assert len(starts) == 14
    window = dt.timedelta(seconds=5)
    assert max(sum(s <= t < s + window for t in starts) for s in starts) == 3
    # Not slower than the limit either: 14 starts at 3 per 5 s fit in four windows.
    assert starts[-1] - starts[0] < 4 * window + dt.timedelta(seconds=1)
    assert not Task.objects.filter(queue_wait__isnull=False).exclude(status="completed").exists()


def test_concurrency_and_rate_together_wait_for_the_tighter(inline, settings, frozen):
    _limit(settings, concurrency=1, rate="5/s")
    found = _fan_out(inline, "rate-3", 3)
    claims = [activity_task._claim(task.id) for task in found]
    assert [lease is not None for lease in claims] == [True, False, False]
    assert {_wait(found[1])[0], _wait(found[2])[0]} == {"capacity"}
    assert inline.sent["activity"] == 0  # the attempt's end sends the next, not a timer


def test_the_per_worker_limit_counts_the_leases_of_one_node(inline, settings, frozen):
    _limit(settings, worker_concurrency=2)
    found = _fan_out(inline, "worker-1", 4)
    try:
        identity.set_node_name("node-a@host")
        on_a = [activity_task._claim(task.id) for task in found[:3]]
        assert [lease is not None for lease in on_a] == [True, True, False]
        assert _wait(found[2])[0] in ("worker", "woken")
        assert Task.objects.filter(lease_node="node-a@host", status="leased").count() == 2
        identity.set_node_name("node-b@host")
        assert activity_task._claim(found[3].id) is not None
        waiting = Task.objects.get(id=found[2].id)
        if waiting.queue_wait == "worker":  # no room was estimated for it: wake it
            assert queue_gate.wake("limited") >= 0
        assert activity_task._claim(found[2].id) is not None  # node b has room
        assert Task.objects.filter(lease_node="node-b@host", status="leased").count() == 2
    finally:
        identity.set_node_name(None)


def test_waiters_go_by_priority_then_age(inline, settings, frozen):
    _limit(settings, concurrency=1)
    stub = WorkflowStub.make("tests.fan-out-prioritised", "prio-1")
    priorities = [5, 9, 0, 5, 2, 0]
    stub.start(priorities, 0)
    found = _scheduled(inline, stub)
    assert [t.priority for t in found] == priorities
    order = []
    for _ in found:
        woken = Task.objects.get(queue_wait="woken")  # one slot: one sent at a time
        order.append(found.index(woken))
        assert not any(activity_task._claim(t.id) for t in found if t.id != woken.id)
        lease = activity_task._claim(woken.id)
        assert lease is not None
        activity_task.run_claimed(lease)
        queue_gate.wake("limited")  # what the worker does once the attempt ended
    # 0 first (the one scheduled first among equals), then 2, then the 5s, then 9.
    assert order == [2, 5, 4, 0, 3, 1]
    inline.run()
    assert WorkflowStub.load("prio-1").output() == list(range(6))


def test_a_stray_message_does_not_overtake_more_urgent_waiters(inline, settings, frozen):
    _limit(settings, concurrency=1)
    stub = WorkflowStub.make("tests.fan-out-prioritised", "prio-2")
    stub.start([5, 0, 9], 0)
    found = _scheduled(inline, stub)
    assert [_wait(task)[0] for task in found] == ["capacity", "woken", "capacity"]
    first = activity_task._claim(found[1].id)
    assert first is not None
    Task.objects.filter(id=first.task_id).update(lease_expires_at=T0)  # the slot frees
    # The slot is free, but the more urgent waiter goes first: the 9 stays behind it.
    assert activity_task._claim(found[2].id) is None
    assert _wait(found[0])[0] == "woken"
    assert _wait(found[2])[0] == "capacity"
    assert activity_task._claim(found[0].id) is not None


def test_the_priority_reaches_retries_and_the_message(inline, settings):
    from durable_workflow.store.tasks import record_of
    from durable_workflow.transport.celery import message_priority

    app = types.SimpleNamespace(conf=types.SimpleNamespace(broker_url="redis://localhost"))
    record = record_of(Task(task_type="activity", priority=2))
    assert message_priority(record, app) == 2  # type: ignore[arg-type]
    app.conf.broker_url = "amqp://guest@localhost//"
    assert message_priority(record, app) == 7  # type: ignore[arg-type]
    app.conf.broker_url = "memory://"
    assert message_priority(record, app) is None  # type: ignore[arg-type]
    workflow = record_of(Task(task_type="workflow", priority=2))
    assert message_priority(workflow, app) is None  # type: ignore[arg-type]


def test_the_doctor_shows_the_rate_window(inline, settings, frozen):
    from durable_workflow.operations.doctor import DoctorContext, report, run_checks

    _limit(settings, rate="2/m", worker_concurrency=3)
    for task in _fan_out(inline, "rate-doc", 4):
        activity_task._claim(task.id)
    ctx = DoctorContext(active_queues=lambda connection: {})
    checks = {c["id"]: c for c in report(run_checks(ctx), now=ctx.now)["checks"]}
    found = checks["queue_limits"]
    assert found["status"] == "ok", found
    details = found["details"]["limited"]
    assert details["rate"] == "2/m" and details["rate_starts_in_window"] == 2
    assert details["leased"] == 2 and details["waiting"] == 1 and details["woken"] == 1
    assert details["waiting_by_reason"]["rate"] == 1
    assert "2 started in the rate window (2/m)" in found["message"]


@pytest.mark.parametrize(
    ("text", "limit", "period"),
    [("50/s", 50, 1), ("1000/m", 1000, 60), ("10/h", 10, 3600), ("5/10s", 5, 10)],
)
def test_rates_read(text, limit, period):
    rate = parse_rate(text)
    assert (rate.limit, rate.period, str(rate)) == (limit, period, text)


@pytest.mark.parametrize(
    "spec",
    [
        {"rate": 50},
        {"rate": "50"},
        {"rate": "0/s"},
        {"rate": "5/0s"},
        {"rate": "5/d"},
        {"rate": "5/25h"},
        {"rate": " 5/s"},
        {"rate": "5/s\x00"},
        {"rate": {"limit": 5, "period": 1}},
        {"worker_concurrency": 0},
        {"worker_concurrency": "2"},
    ],
)
def test_bad_limits_are_refused(settings, spec):
    with pytest.raises(ConfigurationError, match="QUEUES"):
        parse({"q": spec})
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {"q": spec}}
    with pytest.raises(ConfigurationError):
        get_settings()


@pytest.mark.parametrize("priority", [-1, 10, True, 1.5, "1"])
def test_bad_priorities_are_refused(priority):
    from durable_workflow import Activity

    with pytest.raises(ConfigurationError, match="priority"):
        ActivityOptions(priority=priority)
    with pytest.raises(ConfigurationError, match="priority"):
        type("Bad", (Activity,), {"priority": priority, "abstract": True})


def test_the_system_check_reports_a_bad_rate(settings):
    from durable_workflow.checks import check_settings

    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {"q": {"rate": "x"}}}
    errors = check_settings()
    assert [e.id for e in errors] == ["durable_workflow.E001"]
    assert "rate" in errors[0].msg


def test_the_default_priority_leaves_the_options_snapshot_alone(inline):
    stub = WorkflowStub.make("tests.fan-out-limited", "prio-default")
    stub.start(1, 0)
    task = _scheduled(inline, stub)[0]
    assert task.priority == 5
    assert "priority" not in task.activity_execution.options
    assert task.status == TaskStatus.READY


def test_racing_claims_of_many_runs_start_no_more_than_the_rate(inline, settings, frozen):
    import threading

    from django.db import connection

    _limit(settings, rate="3/m", concurrency=5)
    found = [_fan_out(inline, f"race-{n}", 1)[0] for n in range(8)]  # eight runs: no run lock
    admitted, errors = [], []
    barrier = threading.Barrier(len(found))

    def claim(task: Task) -> None:
        try:
            barrier.wait()
            admitted.append(activity_task._claim(task.id) is not None)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(task,)) for task in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(admitted) == [False] * 5 + [True] * 3
    assert WorkQueueStart.objects.filter(queue="limited").count() == 3
    assert Task.objects.filter(status="leased").count() == 3


def test_the_admin_dashboard_lists_limited_queues(inline, settings, frozen, client):
    from django.urls import reverse

    from tests.integration.test_admin_console import login

    _limit(settings, concurrency=1, rate="5/s")
    for task in _fan_out(inline, "dash-1", 3):
        activity_task._claim(task.id)
    viewer = login(client, "view_workflowrun", "view_workflowinstance")
    page = viewer.get(reverse("admin:durable_workflow_dashboard")).content.decode()
    module = page.split('id="dw-queues"', 1)[1].split("</div>", 1)[0]
    assert "<td>limited</td><td>concurrency 1, rate 5/s</td><td>1</td><td>1</td>" in module
    assert "<td>2 (2 concurrency)</td>" in module


def test_waiters_of_a_queue_whose_limit_was_removed_are_sent_by_repair(inline, settings):
    _limit(settings, concurrency=1)
    found = _fan_out(inline, "unlimited-later", 3)
    assert sorted(_wait(task)[0] for task in found) == ["capacity", "capacity", "woken"]
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {}}
    assert executor.repair_pass().redispatched == 2
    assert not Task.objects.filter(queue_wait__in=["capacity", "rate", "worker"]).exists()
    inline.run()
    assert WorkflowStub.load("unlimited-later").output() == [0, 1, 2]
