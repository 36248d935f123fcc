"""An activity's result is written once, into its ``ActivityCompleted`` event; the
execution row keeps no copy, and what shows a result reads it from the event (or from
the row, for rows closed before results stopped being copied there)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import durable_workflow as dw
from durable_workflow import WorkflowStub
from durable_workflow.codec import envelope
from durable_workflow.models import ActivityExecution
from durable_workflow.operations.export import build_bundle
from durable_workflow.store.activities import execution_results
from tests.engine_db import connection
from tests.integration.helpers import events_of, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def _settings(**more: Any) -> dict[str, Any]:
    return {**settings.DURABLE_WORKFLOW, **more}


def _assert_kept_by_the_history_only(stub: WorkflowStub) -> None:
    rows = list(ActivityExecution.objects.filter(run_id=stub.run_id()).order_by("sequence"))
    completed = {
        e["activity_execution_id"]: e["result"] for e in events_of(stub, "ActivityCompleted")
    }
    assert rows and {str(row.id) for row in rows} == set(completed)
    assert all(row.status == "completed" and row.result is None for row in rows)
    found = execution_results(rows)
    assert {str(key): value for key, value in found.items()} == completed


@pytest.mark.parametrize("eager", [False, True], ids=["queued", "eager"])
def test_a_settled_step_leaves_the_result_to_its_event(inline, eager):
    flags = {"EAGER_ACTIVITIES": eager, "EAGER_WORKFLOW_TASKS": eager}
    with override_settings(DURABLE_WORKFLOW=_settings(**flags)):
        stub = start("tests.many-steps", f"result-once-{eager}", 4)
        inline.run()
    assert stub.refresh().output() == sum(range(4))
    _assert_kept_by_the_history_only(stub)


def test_a_local_activity_leaves_the_result_to_its_event(inline):
    stub = start("tests.local-steps", "result-once-local", 3)
    inline.run()
    assert stub.refresh().output() == 3
    _assert_kept_by_the_history_only(stub)


def test_a_result_reported_by_token_is_kept_by_its_event_only(inline):
    stub = WorkflowStub.make("tests.patterns.awaits-outside-work", "result-once-token")
    stub.start("result-once-token")
    inline.run()
    token = Invocation.objects.filter(name="deferred:result-once-token").latest("id").key
    dw.activity_completion(token).complete({"approved": True})
    inline.run()
    assert stub.refresh().output() == {"approved": True}
    _assert_kept_by_the_history_only(stub)


def test_results_of_many_runs_take_one_read_per_run_that_needs_it(inline):
    first, second = (
        start("tests.many-steps", "results-a", 3),
        start("tests.many-steps", "results-b", 2),
    )
    inline.run()
    rows = list(ActivityExecution.objects.filter(run_id__in=[first.run_id(), second.run_id()]))
    old = rows[0]
    old.result = envelope.encode("kept on the row")  # as a row closed before the change
    old.save(update_fields=["result"])
    with CaptureQueriesContext(connection) as queries:
        found = execution_results(rows)
    assert len(queries.captured_queries) == 2
    assert len(found) == 5 and envelope.decode(found[old.id]) == "kept on the row"
    with CaptureQueriesContext(connection) as queries:
        assert execution_results([old]) == {old.id: old.result}
    assert queries.captured_queries == []  # the row's copy needs no read


def test_the_export_and_the_admin_show_the_row_copy_of_an_old_row(inline, client):
    stub = start("tests.sequential", "result-once-old", "ada")
    inline.run()
    bundle = build_bundle("result-once-old")
    completed = {
        e["activity_execution_id"]: e["result"] for e in events_of(stub, "ActivityCompleted")
    }
    assert {a["id"]: a["result"] for a in bundle["activities"]} == completed
    old = ActivityExecution.objects.filter(run_id=stub.run_id()).order_by("sequence").first()
    old.result = envelope.encode("from the old row")
    old.save(update_fields=["result"])
    exported = {a["id"]: a["result"] for a in build_bundle("result-once-old")["activities"]}
    assert envelope.decode(exported[str(old.id)]) == "from the old row"
    user = User.objects.create_user("results", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_activityexecution"))
    client.force_login(user)
    page = reverse("admin:durable_workflow_activityexecution_change", args=[old.pk])
    assert "from the old row" in client.get(page).content.decode()
