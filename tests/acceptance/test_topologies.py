"""Real Celery workers on the topologies of issue 31: the engine's tables on their own
PostgreSQL database, and the engine's tasks routed to queues of their own."""

from __future__ import annotations

import pytest
from django.test import override_settings

from durable_workflow import WorkflowStub
from durable_workflow.models import WorkflowRun
from tests.acceptance.test_celery_worker import assert_history_exactly_once
from tests.celery_app import ENGINE_ROUTES, app, use_routes
from tests.integration.test_doctor import check, doctor
from tests.routers import ENGINE_ALIAS

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True, databases=["default", ENGINE_ALIAS]),
]


@pytest.fixture
def routes():
    saved = app.conf.task_routes
    use_routes(ENGINE_ROUTES)  # this process's publishes follow them, whatever ran before
    yield ENGINE_ROUTES
    use_routes(saved)


def test_routed_queues_run_a_workflow_and_the_doctor_reads_them_right(start_worker, routes):
    start_worker(queues="dw-workflows,dw-activities", env={"DW_CELERY_ROUTES": "1"})
    stub = WorkflowStub.make("tests.many-steps", "routed-queues")
    stub.start(6)
    stub.wait(timeout=60)
    assert stub.status() == "completed", [e.event_type for e in stub.history()]
    assert stub.output() == 15
    assert_history_exactly_once(stub)
    workers = check(doctor(active_queues=None), "workers")  # a real inspect() of the worker
    assert workers["status"] == "ok", workers["message"]
    assert workers["details"]["no_consumer"] == []


def test_a_worker_with_the_engine_on_its_own_database(start_worker):
    with override_settings(DATABASE_ROUTERS=["tests.routers.EngineRouter"]):
        start_worker(env={"DW_TEST_ROUTED": "1"})
        stub = WorkflowStub.make("tests.many-steps", "routed-database")
        stub.start(6)
        stub.wait(timeout=60)
        assert stub.status() == "completed", [e.event_type for e in stub.history()]
        assert stub.output() == 15
        assert_history_exactly_once(stub)
        assert (
            WorkflowRun.objects.using(ENGINE_ALIAS).filter(instance_id="routed-database").count()
            == 1
        )
