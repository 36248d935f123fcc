"""The engine's tables on their own database (``workflows``), the application's on
``default``, with a ``DATABASE_ROUTERS`` entry: every transaction, lock and on-commit
callback of the engine is on the engine's alias."""

from __future__ import annotations

import pytest
from django.core import checks
from django.db import connections, transaction
from django.test import override_settings

from durable_workflow.executor import dispatch
from durable_workflow.models import WorkflowRun
from durable_workflow.store import database
from tests.integration.helpers import Recorder, event_types, start
from tests.routers import ENGINE_ALIAS

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", ENGINE_ALIAS])

ROUTED = override_settings(DATABASE_ROUTERS=["tests.routers.EngineRouter"])


@pytest.fixture(autouse=True)
def _routed():
    with ROUTED:
        yield


@pytest.fixture
def recorder():
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    yield backend
    dispatch.set_backend(previous)


def _engine_rows_on(alias: str) -> int:
    table = WorkflowRun._meta.db_table
    if table not in connections[alias].introspection.table_names():
        return 0
    return WorkflowRun.objects.using(alias).count()


def test_the_engine_alias_is_the_routers_choice():
    assert database.alias() == ENGINE_ALIAS


def test_a_workflow_runs_to_completion_on_the_engines_database(inline):
    stub = start("tests.sequential", "routed-1", "ada")
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    assert stub.output() == ["hello ada", 3]
    assert "WorkflowCompleted" in event_types(stub)
    assert _engine_rows_on(ENGINE_ALIAS) == 1
    assert _engine_rows_on("default") == 0


def test_start_inside_the_engines_transaction_publishes_after_its_commit(recorder):
    with transaction.atomic(using=ENGINE_ALIAS):
        start("tests.sequential", "routed-2", "ada")
        assert recorder.sent == []  # the run is not visible yet: nothing may be published
    assert [sent[0] for sent in recorder.sent] == ["workflow"]


def test_an_application_transaction_does_not_hold_the_engines_message(recorder):
    """The engine's writes are not part of a transaction on another database: they
    commit (and are published) when the engine's own transaction does."""
    with transaction.atomic(using="default"):
        start("tests.sequential", "routed-3", "ada")
        assert [sent[0] for sent in recorder.sent] == ["workflow"]


def test_a_rolled_back_engine_transaction_publishes_nothing(recorder):
    with pytest.raises(RuntimeError), transaction.atomic(using=ENGINE_ALIAS):
        start("tests.sequential", "routed-4", "ada")
        raise RuntimeError("the caller gives up")
    assert recorder.sent == []
    assert _engine_rows_on(ENGINE_ALIAS) == 0


class _SplitRouter:
    """Sends the schedules' tables elsewhere: a split the engine cannot support."""

    def db_for_write(self, model, **hints):
        if model._meta.app_label != "durable_workflow":
            return None
        return "default" if model._meta.model_name.startswith("workflowschedule") else ENGINE_ALIAS

    db_for_read = db_for_write


class _ReadReplicaRouter:
    def db_for_read(self, model, **hints):
        return "default"

    def db_for_write(self, model, **hints):
        return ENGINE_ALIAS


def _routing_errors() -> list[checks.CheckMessage]:
    from durable_workflow.checks import check_database_routing

    return check_database_routing()


def test_the_check_accepts_one_alias_for_every_engine_table():
    assert _routing_errors() == []


@pytest.mark.parametrize(
    ("router", "says"),
    [
        (_SplitRouter, "WorkflowSchedule"),
        (_ReadReplicaRouter, "reads"),
    ],
)
def test_the_check_refuses_a_split_the_engine_cannot_support(router, says):
    with override_settings(DATABASE_ROUTERS=[router()]):
        errors = _routing_errors()
    assert [e.id for e in errors] == ["durable_workflow.E030"]
    assert says in errors[0].msg


def test_webhook_views_stay_out_of_atomic_requests_on_every_database():
    from durable_workflow.webhooks.views import StartView

    view = StartView.as_view()
    assert view._non_atomic_requests >= {"default", ENGINE_ALIAS}
