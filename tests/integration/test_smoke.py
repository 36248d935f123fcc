import pytest

from durable_workflow import WorkflowStub

pytestmark = pytest.mark.django_db(transaction=True)


def test_sequential_completes(inline):
    stub = WorkflowStub.make("tests.sequential", "smoke-1")
    stub.start("ada")
    inline.run()
    stub.refresh()
    assert stub.status() == "completed", [ (e.event_type, e.payload) for e in stub.history()]
    assert stub.output() == ["hello ada", 3]
