"""Queues that limit their runs (issue 26, DBOS's workflow queues), step by step with the
inline backend: who waits, in which order they start, what frees a slot and what does
not. Real workers on a real broker: ``tests/acceptance/test_workflow_queues_worker.py``.
"""

from __future__ import annotations

import datetime as dt

import pytest

from durable_workflow import ConfigurationError, StartOptions, WorkflowStub, clock, executor
from durable_workflow.conf import get_settings
from durable_workflow.executor import workflow_gate
from durable_workflow.models import Task, TaskStatus, TaskType, WorkflowRun
from durable_workflow.options import ChildWorkflowOptions
from durable_workflow.store import tasks, workflow_queues

pytestmark = pytest.mark.django_db(transaction=True)

ON_REPORTS = StartOptions(queue="reports")


@pytest.fixture
def two_slots(settings):
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "QUEUES": {"reports": {"workflow_concurrency": 2}},
    }
    yield


def _start(instance_id: str, priority: int | None = None) -> WorkflowStub:
    stub = WorkflowStub.make("tests.waits-for-go", instance_id)
    stub.start(0, options=ON_REPORTS.with_queue("reports", priority=priority))
    return stub


def _slot(stub: WorkflowStub) -> str | None:
    return WorkflowRun.objects.get(id=stub.run_id()).queue_slot


def _started(stub: WorkflowStub) -> bool:
    """Whether a workflow task of the run ran (its body waits for ``go`` since)."""
    return WorkflowRun.objects.get(id=stub.run_id()).workflow_task_sequence > 0


def test_runs_past_the_limit_wait_pending_with_no_message(inline, two_slots):
    stubs = [_start(f"wq-{n}") for n in range(4)]
    assert [_slot(s) for s in stubs] == ["held", "held", "waiting", "waiting"]
    assert inline.sent["workflow"] == 2  # the waiting runs' tasks were not sent
    inline.run()
    assert [_started(s) for s in stubs] == [True, True, False, False]
    assert [s.describe().status for s in stubs[2:]] == ["pending", "pending"]
    waiting = Task.objects.filter(run_id=stubs[2].run_id(), task_type=TaskType.WORKFLOW).get()
    assert (waiting.status, waiting.queue_wait) == (TaskStatus.READY, "capacity")
    # Neither the repair pass nor a duplicate message starts a waiting run.
    clock.advance(dt.timedelta(seconds=120))
    assert executor.repair_pass().redispatched == 0
    assert executor.run_workflow_task(waiting.id) == "queued"
    assert not _started(stubs[2])
    described = stubs[2].describe()
    assert described.waiting_for_queue == "reports"
    assert described.waiting_on[0].summary == 'waiting for a slot on workflow queue "reports"'
    assert stubs[0].describe().waiting_for_queue is None


def test_a_closing_run_lets_the_next_one_start_first_come_first_served(inline, two_slots):
    stubs = [_start(f"wq-fifo-{n}") for n in range(5)]
    inline.run()
    stubs[1].signal("go")
    inline.run()  # closes run 1; its slot goes to run 2 once that commits
    assert stubs[1].describe().status == "completed"
    assert [_started(s) for s in stubs] == [True, True, True, False, False]
    stubs[0].signal("go")
    inline.run()
    assert [_started(s) for s in stubs] == [True, True, True, True, False]
    assert workflow_gate.wake("reports") == 0  # no slot free: nobody moves


def test_priorities_order_the_line_lower_first_and_fifo_within_one(inline, two_slots):
    holders = [_start(f"wq-p-hold-{n}") for n in range(2)]
    inline.run()
    low, high, plain, high_later = (
        _start("wq-p-low", priority=9),
        _start("wq-p-high", priority=1),
        _start("wq-p-plain"),
        _start("wq-p-high-later", priority=1),
    )
    waiting, order = [low, high, plain, high_later], []
    for _ in range(4):
        releasing = next(s for s in [*holders, *order] if s.describe().status != "completed")
        releasing.signal("go")
        inline.run()
        (moved,) = [s for s in waiting if _started(s)]
        waiting.remove(moved)
        order.append(moved)
    assert [s.id() for s in order] == [
        "wq-p-high",
        "wq-p-high-later",
        "wq-p-plain",  # no priority: 5
        "wq-p-low",
    ]


def test_a_run_cancelled_or_terminated_while_waiting_frees_nothing(inline, two_slots):
    held = [_start(f"wq-c-{n}") for n in range(2)]
    cancelled, terminated, third = _start("wq-c-x"), _start("wq-c-y"), _start("wq-c-z")
    inline.run()
    cancelled.cancel("not needed")
    terminated.terminate("not needed")
    assert cancelled.describe().status == "cancelled"
    assert terminated.describe().status == "terminated"
    inline.run()
    assert not _started(cancelled) and not _started(terminated)
    assert workflow_gate.wake("reports") == 0  # both slots are still held
    assert [_slot(s) for s in held] == ["held", "held"] and _slot(third) == "waiting"
    assert Task.objects.filter(run_id=cancelled.run_id(), status=TaskStatus.READY).count() == 0
    held[0].signal("go")
    inline.run()
    assert _started(third)


def test_a_lost_wake_up_is_made_good_by_the_repair_pass(inline, two_slots, monkeypatch):
    stubs = [_start(f"wq-r-{n}") for n in range(3)]
    inline.run()
    monkeypatch.setattr(workflow_gate, "release", lambda run: None)  # the wake-up is lost
    stubs[0].signal("go")
    inline.run()
    assert stubs[0].describe().status == "completed" and not _started(stubs[2])
    monkeypatch.undo()
    assert executor.repair_pass().redispatched == 1
    inline.run()
    assert _started(stubs[2])


def test_a_continued_run_keeps_its_slot(inline, two_slots):
    continuing = WorkflowStub.make("tests.continues-once", "wq-can")
    continuing.start(0, options=ON_REPORTS)
    other, third = _start("wq-can-1"), _start("wq-can-2")
    inline.run()
    runs = WorkflowRun.objects.filter(instance_id="wq-can").order_by("run_number")
    assert [(r.status, r.queue_slot) for r in runs] == [("completed", "held"), ("waiting", "held")]
    assert _slot(other) == "held" and not _started(third)  # nobody got the continued slot


def test_a_child_waits_in_line_by_its_priority(inline, two_slots):
    _start("wq-ch-0"), _start("wq-ch-1"), _start("wq-ch-plain-later", priority=5)
    inline.run()
    parent = WorkflowStub.make("tests.starts-queued-child", "wq-ch-parent")
    parent.start(2)
    inline.run()
    child = WorkflowRun.objects.get(parent_run_id=parent.run_id())
    assert (child.queue, child.queue_slot, child.priority) == ("reports", "waiting", 2)
    WorkflowStub.load("wq-ch-0").signal("go")
    inline.run()
    child.refresh_from_db()
    assert child.queue_slot == "held" and child.workflow_task_sequence > 0
    assert not _started(WorkflowStub.load("wq-ch-plain-later"))
    assert ChildWorkflowOptions(queue="reports").snapshot().get("priority") is None


def test_the_limit_applies_to_starts_from_every_door(inline, two_slots):
    _start("wq-d-0"), _start("wq-d-1")
    inline.run()
    stub = WorkflowStub.make("tests.waits-for-go", "wq-d-2")
    stub.signal_with_start("go", start_args=[7], options=ON_REPORTS)
    assert _slot(stub) == "waiting"


@pytest.mark.parametrize("priority", [-1, 10, True, 1.5, "1"])
def test_a_priority_out_of_range_is_refused_at_the_boundary(priority):
    with pytest.raises(ConfigurationError, match="priority"):
        StartOptions(priority=priority)
    with pytest.raises(ConfigurationError, match="priority"):
        ChildWorkflowOptions(priority=priority)


@pytest.mark.parametrize("queue", ["", "a\x00b", "\ud800", "x" * 256])
def test_a_start_queue_is_validated(queue):
    with pytest.raises(ConfigurationError, match="queue"):
        StartOptions(queue=queue)


@pytest.mark.parametrize("value", [0, -1, True, "2"])
def test_workflow_concurrency_is_checked_when_settings_are_read(settings, value):
    settings.DURABLE_WORKFLOW = {"QUEUES": {"reports": {"workflow_concurrency": value}}}
    with pytest.raises(ConfigurationError, match="workflow_concurrency"):
        get_settings()


def test_an_unlimited_queue_starts_at_once_and_records_no_slot(inline):
    stub = _start("wq-free")
    assert _slot(stub) is None
    inline.run()
    assert _started(stub)
    assert tasks.ready_and_due(now=clock.now()) == []


def test_the_doctor_the_admin_and_the_metrics_show_the_line(inline, two_slots, settings, client):
    from prometheus_client.parser import text_string_to_metric_families

    from durable_workflow.admin.triage import triage
    from durable_workflow.operations import schemas
    from durable_workflow.operations.doctor import DoctorContext, report, run_checks

    stubs = [_start(f"wq-ops-{n}") for n in range(4)]
    inline.run()
    clock.advance(dt.timedelta(hours=1))  # long past the stuck threshold
    ctx = DoctorContext(active_queues=lambda connection: {})
    document = report(run_checks(ctx), now=ctx.now)
    schemas.validate(document, schemas.DOCTOR)
    checks = {c["id"]: c for c in document["checks"]}
    found = checks["workflow_queues"]
    assert found["details"] == {"reports": {"limit": 2, "running": 2, "waiting": 2}}
    assert found["status"] == "ok"
    assert 'workflow queue "reports": 2/2 running, 2 waiting' in found["message"]
    assert checks["stuck_tasks"]["status"] == "ok"  # the waiting runs' tasks are not stuck
    # A slot freed and its wake-up lost (no repair pass yet): the doctor warns.
    WorkflowRun.objects.filter(id=stubs[0].run_id()).update(status="completed")
    found = {c.id: c for c in run_checks(ctx)}["workflow_queues"]
    assert found.status == "warning" and "repair" in found.next_step

    run = WorkflowRun.objects.get(id=stubs[3].run_id())
    assert [w for _, w in triage([run])[run.pk].waits] == [
        'waiting for a slot on workflow queue "reports"'
    ]

    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "PROMETHEUS_METRICS": True,
        "PROMETHEUS_SCRAPE_TOKEN": "scrape-token-0123456789",
    }
    response = client.get("/metrics/", HTTP_AUTHORIZATION="Bearer scrape-token-0123456789")
    samples = {
        (sample.name, tuple(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }
    label = (("queue", "reports"),)
    assert samples[("durable_workflow_workflow_queue_limit", label)] == 2
    assert samples[("durable_workflow_workflow_queue_running", label)] == 1
    assert samples[("durable_workflow_workflow_queue_waiting", label)] == 2


def test_runs_left_waiting_when_the_limit_is_removed_go_at_the_next_repair_pass(
    inline, two_slots, settings
):
    stubs = [_start(f"wq-gone-{n}") for n in range(4)]
    inline.run()
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {}}
    assert executor.repair_pass().redispatched == 2
    inline.run()
    assert all(_started(s) for s in stubs)
    assert [_slot(s) for s in stubs] == ["held", "held", None, None]
    assert executor.repair_pass().redispatched == 0


def test_a_queue_whose_limit_was_taken_out_is_named_once(inline, two_slots, settings):
    """The repair pass wakes each stranded queue once: the tasks' default ordering put
    created_at into the DISTINCT that names them, once per waiting run."""
    for n in range(4):
        _start(f"wq-stranded-{n}")
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "QUEUES": {}}
    assert workflow_queues.stranded_queues([]) == ["reports"]
