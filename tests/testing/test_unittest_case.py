"""``WorkflowTestCase`` with Django's own test cases (no pytest fixtures involved)."""

from __future__ import annotations

from django.test import TestCase, TransactionTestCase

from durable_workflow import WorkflowStub, clock
from durable_workflow.testing import WorkflowTestCase
from tests.testapp.testing_workflows import (
    ApprovalWorkflow,
    GreetingActivity,
    MyTimerWorkflow,
    SettingsWorkflow,
)


class SpecExamples:
    def test_signal(self):
        WorkflowStub.mock(GreetingActivity, "Hello, Taylor!")
        workflow = WorkflowStub.make(ApprovalWorkflow, "approval-1")
        workflow.start()
        self.assertEqual(workflow.refresh().status(), "waiting")
        workflow.signal("name-provided", "Taylor")
        self.assertTrue(workflow.refresh().completed())
        self.assertEqual(workflow.output(), {"name": "Taylor", "greeting": "Hello, Taylor!"})
        WorkflowStub.assert_signal_sent_times("name-provided", 1)

    def test_timer(self):
        workflow = WorkflowStub.make(MyTimerWorkflow, "timer-workflow")
        workflow.start()
        self.travel(seconds=60)
        WorkflowStub.run_ready_tasks()
        self.assertTrue(workflow.refresh().completed())
        self.assertEqual(workflow.output(), {"done": True})

    def test_update(self):
        workflow = WorkflowStub.make(SettingsWorkflow, "settings-1")
        workflow.start()
        self.assertTrue(workflow.attempt_update("toggle", True).accepted)
        workflow.signal("done")
        self.assertEqual(workflow.refresh().output(), {"enabled": True})
        WorkflowStub.assert_update_sent("toggle")

    def tearDown(self):
        super().tearDown()
        self.assertTrue(WorkflowStub.is_fake())  # still faked during tearDown; cleanups undo it


class InsideATestTransaction(SpecExamples, WorkflowTestCase, TestCase):
    pass


class WithRealCommits(SpecExamples, WorkflowTestCase, TransactionTestCase):
    pass


class WithoutFakeMode(WorkflowTestCase, TestCase):
    workflow_fake = False

    def test_starts_outside_fake_mode_and_resets_the_clock(self):
        self.assertFalse(WorkflowStub.is_fake())
        self.assertIsNone(self.workflow_kit)
        self.freeze()
        self.assertFalse(clock.is_real())
