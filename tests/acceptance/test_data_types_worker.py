"""Every supported type through every boundary with a real Celery worker (PostgreSQL).

The fake-mode twin is tests/integration/test_data_types.py; both assert that
each receiver got the very same values (types, zones and Decimal exponents too).
"""

from __future__ import annotations

import pytest

from durable_workflow import ModelRef, WorkflowStub
from tests.integration.test_data_types import assert_every_receiver_got_the_bundle, run_round_trip
from tests.testapp.data_types import RowWorkflow
from tests.testapp.models import Invocation
from tests.testing.test_fake_vs_real import WorkerDriver

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_every_type_round_trips_through_a_real_worker(start_worker):
    driver = WorkerDriver(start_worker(beat=False))
    _, seen = run_round_trip(driver.settle, "types-worker")
    assert_every_receiver_got_the_bundle(seen)


def test_a_worker_activity_gets_the_row_and_a_deleted_row_fails_typed(start_worker):
    driver = WorkerDriver(start_worker(beat=False))
    row = Invocation.objects.create(name="worker-row")
    stub = WorkflowStub.make(RowWorkflow, "rows-worker")
    stub.start(ModelRef.of(row))
    driver.settle()
    assert stub.result(timeout=60)["activity"]["type"] == "Invocation"
    gone = WorkflowStub.make(RowWorkflow, "rows-worker-gone")
    gone.start(ModelRef.of(Invocation.objects.create(name="doomed")), True)
    driver.settle()
    assert gone.result(timeout=60)["failure"]["is_model_error"] is True
