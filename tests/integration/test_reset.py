"""Reset and fork: a new run from a point of an old run's history (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from durable_workflow import ResetRefusedError, WorkflowStub
from durable_workflow.models import WorkflowCommand, WorkflowRun
from durable_workflow.testing import Replayer
from tests.integration.helpers import event_types, start
from tests.testapp import rewind
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fixed():
    rewind.FIX.update(charge=True, body=True)
    yield
    rewind.FIX.update(charge=True, body=True)


def test_smoke(inline):
    rewind.FIX["charge"] = False
    stub = start("tests.rewind", "rw-smoke", 1)
    inline.run()
    print(stub.refresh().status(), event_types(stub))
    rewind.FIX["charge"] = True
    result = stub.reset("first_failure", reason="fixed the card")
    print(result)
    inline.run()
    print(stub.refresh().status(), event_types(stub), stub.output())
