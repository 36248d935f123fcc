"""The testing guide's examples, translated to Python, in fake mode."""

from __future__ import annotations

import pytest

from durable_workflow import StartOptions, WorkflowStub
from durable_workflow.models import (
    ActivityExecution,
    HistoryEvent,
    Task,
    WorkflowCommand,
)
from durable_workflow.testing import LogicError, travel
from tests.testapp.testing_workflows import (
    ApprovalWorkflow,
    GreetingActivity,
    MyActivity,
    MyTimerWorkflow,
    MyWorkflow,
    SettingsWorkflow,
)


def test_workflow_with_a_mocked_activity(workflow_fake):
    seen = {}

    def fake_activity(context, name):
        seen.update(name=name, workflow_id=context.workflow_id(), attempt=context.attempt_count())
        return f"Hello, {name}!"

    WorkflowStub.mock(MyActivity, fake_activity)

    workflow = WorkflowStub.make(MyWorkflow, "my-workflow-id")
    workflow.start()

    assert workflow.refresh().completed()
    assert workflow.output()["result"] == "Hello, Taylor!"
    assert workflow.output()["workflow_id"] == "my-workflow-id"
    assert workflow.output()["run_id"] == workflow.run_id()
    assert seen == {"name": "Taylor", "workflow_id": "my-workflow-id", "attempt": 1}

    WorkflowStub.assert_dispatched(MyActivity, lambda name: name == "Taylor")

    # the mock went through the executor: durable execution, task and history rows
    execution = ActivityExecution.objects.get(run_id=workflow.run_id())
    assert (execution.activity_type, execution.status) == ("kit.my-activity", "completed")
    assert Task.objects.filter(run_id=workflow.run_id(), task_type="activity").count() == 1
    assert [e.event_type for e in workflow.history()] == [
        "StartAccepted",
        "WorkflowStarted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


def test_mocking_a_workflow_replaces_its_body(workflow_fake):
    # The spec's first release refused this; issue 21 adds it (an additive contract).
    WorkflowStub.mock(MyWorkflow, {"result": "mocked"})
    workflow = WorkflowStub.make(MyWorkflow, "mocked-workflow")
    workflow.start()
    assert workflow.refresh().output() == {"result": "mocked"}
    WorkflowStub.assert_nothing_dispatched()  # the real body, and its activity, never ran
    with pytest.raises(LogicError, match="dispatch-asserted"):
        WorkflowStub.assert_dispatched("kit.my-workflow")


def test_timer_waits_for_time_travel(workflow_fake):
    workflow = WorkflowStub.make(MyTimerWorkflow, "timer-workflow")
    workflow.start()

    WorkflowStub.run_ready_tasks()
    assert workflow.refresh().status() == "waiting"  # the timer is not due: nothing fires

    travel(seconds=60)

    WorkflowStub.run_ready_tasks()

    assert workflow.refresh().completed()
    assert workflow.output() == {"done": True}


def test_signal_resumes_the_workflow_inline(workflow_fake):
    WorkflowStub.mock(GreetingActivity, "Hello, Taylor!")

    workflow = WorkflowStub.make(ApprovalWorkflow, "approval-1")
    workflow.start()

    assert workflow.refresh().status() == "waiting"

    workflow.signal("name-provided", "Taylor")

    assert workflow.refresh().completed()
    assert workflow.output()["name"] == "Taylor"
    assert workflow.output()["greeting"] == "Hello, Taylor!"

    WorkflowStub.assert_signal_sent("name-provided")
    WorkflowStub.assert_signal_sent_times("name-provided", 1)
    WorkflowStub.assert_signal_not_sent("other-signal")
    WorkflowStub.assert_signal_sent(
        "name-provided",
        lambda instance_id, name: instance_id == "approval-1" and name == "Taylor",
    )


def test_update_applies_inline(workflow_fake):
    workflow = WorkflowStub.make(SettingsWorkflow, "settings-1")
    workflow.start()

    assert workflow.refresh().status() == "waiting"

    result = workflow.attempt_update("toggle", True)

    assert result.accepted
    assert result.completed and result.result == {"enabled": True}

    WorkflowStub.assert_update_sent("toggle")
    WorkflowStub.assert_update_sent_times("toggle", 1)
    WorkflowStub.assert_update_not_sent("other-update")
    WorkflowStub.assert_update_sent(
        "toggle", lambda instance_id, enabled: instance_id == "settings-1" and enabled is True
    )

    workflow.signal("done")
    assert workflow.refresh().completed()
    assert workflow.output()["enabled"] is True


def test_reject_duplicate_start(workflow_fake):
    WorkflowStub.mock(MyActivity, "result")

    workflow = WorkflowStub.make(MyWorkflow, "order-123")
    first = workflow.start()
    assert first.accepted and first.outcome == "started_new"

    second = WorkflowStub.load("order-123")
    duplicate = second.attempt_start()

    assert duplicate.rejected
    assert duplicate.rejection_reason == "instance_already_started"


def test_return_existing_active_start(workflow_fake):
    workflow = WorkflowStub.make(ApprovalWorkflow, "order-123")
    workflow.start()
    assert workflow.refresh().status() == "waiting"

    second = WorkflowStub.load("order-123")
    result = second.attempt_start(StartOptions.return_existing_active())

    assert result.accepted
    assert result.outcome == "returned_existing_active"
    assert result.run_id == workflow.run_id()
    commands = WorkflowCommand.objects.filter(instance_id="order-123", command_type="start")
    assert [c.outcome for c in commands.order_by("created_at")] == [
        "started_new",
        "returned_existing_active",
    ]
    assert HistoryEvent.objects.filter(run_id=workflow.run_id()).exists()


def test_history_budget_recommends_continue_as_new(workflow_fake, settings):
    # The spec checks the run summary; the workflow itself sees the same
    # recommendation through should_continue_as_new().
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "CONTINUE_AS_NEW_EVENT_THRESHOLD": 12}
    workflow = WorkflowStub.make("tests.budget", "budget-test")
    workflow.start()
    assert workflow.refresh().completed()
    output = workflow.output()
    assert output["length"] >= 12 and output["steps"] >= 1
    WorkflowStub.assert_dispatched_times("tests.add", output["steps"])
