"""Every assertion: when it passes, when it fails, and what its failure message says."""

from __future__ import annotations

import re

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.testing import LogicError
from tests.testapp.testing_workflows import MyWorkflow
from tests.testapp.workflows import Add, Flaky, Greet


def fails(pattern: str):
    return pytest.raises(AssertionError, match=re.compile(pattern, re.S))


@pytest.fixture
def recorded(workflow_fake):
    """Two activities, an accepted and a rejected signal, an accepted and a rejected update."""
    WorkflowStub.mock(Greet, "hi")
    WorkflowStub.mock(Add, 3)
    WorkflowStub.make("tests.sequential", "seq-1").start("Ada")
    approval = WorkflowStub.make("tests.approval", "appr-1")
    approval.start("signal")
    approval.attempt_signal("no-such-signal", 1)
    approval.signal("approved-by", "Ada", 2)
    updates = WorkflowStub.make("tests.approval", "upd-1")
    updates.start("updates")
    updates.attempt_update("add-item", "x")
    updates.attempt_update("mark-ready", "not a bool")
    return workflow_fake


# ------------------------------------------------------------------ activities
def test_dispatch_assertions_pass(recorded):
    WorkflowStub.assert_dispatched(Greet)
    WorkflowStub.assert_dispatched("tests.greet", lambda name: name == "Ada")
    WorkflowStub.assert_dispatched(Add, lambda a, b: (a, b) == (1, 2))
    WorkflowStub.assert_dispatched(Greet, 1)  # the legacy (activity, times) form
    WorkflowStub.assert_dispatched_times(Greet, 1)
    WorkflowStub.assert_dispatched_times(Flaky, 0)
    WorkflowStub.assert_not_dispatched(Flaky)
    WorkflowStub.assert_not_dispatched(Greet, lambda name: name == "Bo")


def test_assert_dispatched_lists_what_was_dispatched(recorded):
    with fails(
        r"The expected activity \[tests.flaky\] was not dispatched\.\n"
        r"Activity dispatches recorded since WorkflowStub.fake\(\) \(2\):\n"
        r"  - tests.greet\('Ada'\) to 'seq-1' \[completed\]\n"
        r"  - tests.add\(1, 2\) to 'seq-1' \[completed\]$"
    ):
        WorkflowStub.assert_dispatched(Flaky)


def test_assert_dispatched_with_a_callback_that_never_passes(recorded):
    with fails(
        r"\[tests.greet\] was dispatched 1 time, but never with arguments that pass the "
        r"callback\..*tests.greet\('Ada'\)"
    ):
        WorkflowStub.assert_dispatched(Greet, lambda name: name == "Bo")


def test_assert_dispatched_times(recorded):
    with fails(r"\[tests.greet\] was dispatched 1 time instead of 2 times\..*tests.add\(1, 2\)"):
        WorkflowStub.assert_dispatched_times(Greet, 2)
    with fails(r"\[tests.flaky\] was dispatched 0 times instead of 1 time\."):
        WorkflowStub.assert_dispatched_times(Flaky, 1)


def test_assert_not_dispatched(recorded):
    with fails(
        r"The unexpected activity \[tests.add\] was dispatched 1 time\.\n"
        r"Matching dispatches recorded .*\(1\):\n  - tests.add\(1, 2\) to 'seq-1'"
    ):
        WorkflowStub.assert_not_dispatched(Add)
    with fails(r"\[tests.greet\] was dispatched with arguments that pass the callback 1 time"):
        WorkflowStub.assert_not_dispatched(Greet, lambda name: name == "Ada")


def test_assert_nothing_dispatched(recorded):
    with fails(r"Expected no activities to be dispatched, but 2 were\..*tests.greet"):
        WorkflowStub.assert_nothing_dispatched()


def test_assert_nothing_dispatched_passes_and_an_empty_listing_says_so(workflow_fake):
    WorkflowStub.assert_nothing_dispatched()
    with fails(r"No activity dispatches were recorded since WorkflowStub.fake\(\)\.$"):
        WorkflowStub.assert_dispatched(Greet)


def test_workflows_cannot_be_dispatch_asserted(workflow_fake):
    with pytest.raises(LogicError, match="observable output"):
        WorkflowStub.assert_dispatched(MyWorkflow)


# --------------------------------------------------------------------- signals
def test_signal_assertions_pass(recorded):
    WorkflowStub.assert_signal_sent("approved-by")
    WorkflowStub.assert_signal_sent(
        "approved-by", lambda iid, who, n: (iid, who, n) == ("appr-1", "Ada", 2)
    )
    WorkflowStub.assert_signal_sent_times("approved-by", 1)
    WorkflowStub.assert_signal_sent_times("no-such-signal", 0)  # rejected: not counted
    WorkflowStub.assert_signal_not_sent("no-such-signal")
    WorkflowStub.assert_signal_not_sent("approved-by", lambda iid, *args: iid == "other")


def test_assert_signal_sent_lists_signals_and_rejections(recorded):
    with fails(
        r"The expected signal \[no-such-signal\] was not sent \(it was rejected 1 time\)\.\n"
        r"Signals recorded since WorkflowStub.fake\(\) \(2\):\n"
        r"  - no-such-signal\(\.\.\.\) to 'appr-1' \[rejected: unknown_signal\]\n"
        r"  - approved-by\('Ada', 2\) to 'appr-1' \[applied\]$"
    ):
        WorkflowStub.assert_signal_sent("no-such-signal")
    with fails(r"The expected signal \[ping\] was not sent\.\n"):
        WorkflowStub.assert_signal_sent("ping")


def test_assert_signal_sent_with_a_callback_that_never_passes(recorded):
    with fails(r"\[approved-by\] was sent 1 time, but never with arguments that pass"):
        WorkflowStub.assert_signal_sent("approved-by", lambda iid, *args: iid == "other")


def test_assert_signal_sent_times(recorded):
    with fails(r"The expected signal \[approved-by\] was sent 1 time instead of 3 times\."):
        WorkflowStub.assert_signal_sent_times("approved-by", 3)


def test_assert_signal_not_sent(recorded):
    with fails(
        r"The unexpected signal \[approved-by\] was sent 1 time\.\n"
        r"Matching signals recorded .*\(1\):\n  - approved-by\('Ada', 2\)"
    ):
        WorkflowStub.assert_signal_not_sent("approved-by")
    with fails(r"\[approved-by\] was sent with arguments that pass the callback 1 time"):
        WorkflowStub.assert_signal_not_sent("approved-by", lambda iid, who, n: who == "Ada")


# --------------------------------------------------------------------- updates
def test_update_assertions_pass(recorded):
    WorkflowStub.assert_update_sent("add-item")
    WorkflowStub.assert_update_sent("add-item", lambda iid, item: (iid, item) == ("upd-1", "x"))
    WorkflowStub.assert_update_sent_times("add-item", 1)
    WorkflowStub.assert_update_sent_times("mark-ready", 0)  # rejected by its validator
    WorkflowStub.assert_update_not_sent("mark-ready")
    WorkflowStub.assert_update_not_sent("add-item", lambda iid, item: item == "y")


def test_assert_update_sent(recorded):
    with fails(
        r"The expected update \[mark-ready\] was not sent \(it was rejected 1 time\)\.\n"
        r"Updates recorded since WorkflowStub.fake\(\) \(2\):\n"
        r"  - add-item\('x'\) to 'upd-1' \[completed\]\n"
        r"  - mark-ready\(\.\.\.\) to 'upd-1' \[rejected: validation_failed\]$"
    ):
        WorkflowStub.assert_update_sent("mark-ready")
    with fails(r"\[add-item\] was sent 1 time, but never with arguments that pass the callback"):
        WorkflowStub.assert_update_sent("add-item", lambda iid, item: item == "y")


def test_assert_update_sent_times(recorded):
    with fails(r"The expected update \[add-item\] was sent 1 time instead of 2 times\."):
        WorkflowStub.assert_update_sent_times("add-item", 2)


def test_assert_update_not_sent(recorded):
    with fails(r"The unexpected update \[add-item\] was sent 1 time\.\n.*add-item\('x'\)"):
        WorkflowStub.assert_update_not_sent("add-item")
    with fails(r"\[add-item\] was sent with arguments that pass the callback 1 time"):
        WorkflowStub.assert_update_not_sent("add-item", lambda iid, item: item == "x")


@pytest.mark.django_db
def test_outside_fake_mode_assertions_read_every_row(inline):
    stub = WorkflowStub.make("tests.sequential", "no-fake")
    stub.start("Cy")
    inline.run()
    WorkflowStub.assert_dispatched(Greet, lambda name: name == "Cy")
    with fails(r"Activity dispatches recorded \(2\):"):  # no "since WorkflowStub.fake()"
        WorkflowStub.assert_nothing_dispatched()
