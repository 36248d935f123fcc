"""``WorkflowStub.mock(ChildWorkflow, ...)``: the child's events are recorded as if it ran."""

from __future__ import annotations

import pytest

import durable_workflow as dw
from durable_workflow import WorkflowStub
from tests.integration.helpers import event_types
from tests.testapp.composition import ChildEcho
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def children_of(stub: WorkflowStub) -> list[WorkflowStub]:
    ids = [
        e.payload["child_instance_id"]
        for e in stub.history()
        if e.event_type == "ChildWorkflowScheduled"
    ]
    return [WorkflowStub.load(child_id) for child_id in ids]


def test_a_value_stands_in_for_the_child():
    with WorkflowStub.fake():
        WorkflowStub.mock(ChildEcho, {"echo": "mocked"})
        stub = WorkflowStub.make("tests.patterns.uses-children", "mock-value")
        stub.start()
    assert stub.refresh().output() == [{"echo": "mocked"}, {"echo": "mocked"}]
    assert not Invocation.objects.exists()  # the real child's activity never ran
    for child in children_of(stub):
        assert event_types(child) == ["StartAccepted", "WorkflowStarted", "WorkflowCompleted"]
    assert event_types(stub).count("ChildRunCompleted") == 2


def test_an_exception_fails_the_child_and_a_callable_sees_info_and_arguments():
    seen = []

    def fake_child(info: dw.WorkflowInfo, value: int) -> dict:
        seen.append((info.parent_instance_id, value))
        if value == 2:
            raise ValueError("second child refused")
        return {"echo": value * 10}

    with WorkflowStub.fake():
        WorkflowStub.mock("tests.child-echo", fake_child)
        stub = WorkflowStub.make("tests.patterns.uses-children", "mock-callable")
        stub.start()
    assert stub.refresh().output() == [{"echo": 10}, "failed: second child refused"]
    assert seen == [("mock-callable", 1), ("mock-callable", 2)]
    assert [c.status() for c in children_of(stub)] == ["completed", "failed"]


def test_mocks_end_with_fake_mode():
    with WorkflowStub.fake():
        WorkflowStub.mock(ChildEcho, ValueError("never"))
    with WorkflowStub.fake():
        stub = WorkflowStub.make("tests.patterns.uses-children", "mock-restored")
        stub.start()
    assert stub.refresh().output() == [{"echo": 2}, {"echo": 3}]
