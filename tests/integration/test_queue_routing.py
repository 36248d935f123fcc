"""``CELERY_TASK_ROUTES`` sending the engine's tasks to custom queues: the doctor, the
metrics and the repair pass resolve each task's queue the way Celery will (the task's
own queue, then the routes, then the default) and report by that queue."""

from __future__ import annotations

import pytest

from durable_workflow import clock
from durable_workflow.executor import dispatch
from durable_workflow.operations import metrics
from durable_workflow.transport.celery import effective_queue
from tests.celery_app import ENGINE_ROUTES, app, use_routes
from tests.integration.helpers import Recorder, start
from tests.integration.test_doctor import check, doctor

pytestmark = pytest.mark.django_db(transaction=True)

ROUTES = ENGINE_ROUTES


@pytest.fixture
def routes():
    saved = app.conf.task_routes
    use_routes(ROUTES)  # what this process publishes follows them too
    yield ROUTES
    use_routes(saved)


@pytest.fixture
def recorder():
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    yield backend
    dispatch.set_backend(previous)


def consuming(*queues):
    def active_queues(connection):
        return {"worker@host": [{"name": q} for q in queues]}

    return active_queues


def test_a_queue_resolves_like_celery_does(routes):
    assert effective_queue(None, None, "workflow") == "dw-workflows"
    assert effective_queue(None, None, "timer") == "dw-workflows"
    assert effective_queue(None, None, "activity") == "dw-activities"
    assert effective_queue("own", None, "activity") == "own"  # an explicit queue wins
    app.conf.task_routes = None
    assert effective_queue(None, None, "activity") == app.conf.task_default_queue


def test_the_router_celery_uses_agrees(routes):
    """Celery's own router, the one ``send_task`` runs, picks the same queues."""
    for task_type, name in (("workflow", "workflow_task"), ("activity", "activity_task")):
        chosen = app.amqp.router.route({}, f"durable_workflow.{name}", (), {})["queue"].name
        assert effective_queue(None, None, task_type) == chosen


def test_routes_set_after_a_publish_reach_the_router_send_task_runs():
    """Celery builds ``app.amqp.router`` once, on the first publish; a fixture that
    changes the routes later (``use_routes``) rebuilds it. Without that, any test that
    published first left the routed-queues acceptance test's messages on ``celery``."""
    saved = app.conf.task_routes
    assert app.amqp.router is not None  # built now, as an earlier test's publish builds it
    try:
        use_routes(ROUTES)
        chosen = app.amqp.router.route({}, "durable_workflow.workflow_task", (), {})
        assert chosen["queue"].name == effective_queue(None, None, "workflow") == "dw-workflows"
    finally:
        use_routes(saved)
    chosen = app.amqp.router.route({}, "durable_workflow.workflow_task", (), {})
    assert chosen["queue"].name == app.conf.task_default_queue


def test_the_doctor_wants_the_routed_queues_not_the_default(routes):
    document = doctor(active_queues=consuming("dw-workflows", "dw-activities"))
    workers = check(document, "workers")
    assert workers["status"] == "ok", workers["message"]
    assert "celery" not in workers["details"]["no_consumer"]


def test_the_doctor_names_an_unconsumed_routed_queue_with_open_work(routes, recorder):
    clock.freeze()
    start("tests.sequential", "routed-q-1", "ada")
    document = doctor(active_queues=consuming("celery", "dw-activities"))
    workers = check(document, "workers")
    assert workers["status"] == "error"
    assert "dw-workflows" in workers["message"]
    assert workers["details"]["no_consumer"] == ["dw-workflows"]


def test_metrics_report_by_the_resolved_queue(routes, recorder):
    start("tests.sequential", "routed-q-2", "ada")
    per_queue = {row["queue"]: row for row in metrics.queues(clock.now())}
    assert "dw-workflows" in per_queue
    assert per_queue["dw-workflows"]["ready"] + per_queue["dw-workflows"]["delayed"] == 1
    assert "celery" not in per_queue
