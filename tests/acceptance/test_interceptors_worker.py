"""Headers and interceptors through a real Celery worker (PostgreSQL): the client's
tenant header reaches the workflow, its child and their activities, which run in the
worker process with the tenant set by that process's own interceptors."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings

from durable_workflow import WorkflowStub
from durable_workflow.testing import Replayer
from tests.integration.helpers import events_of
from tests.testapp import tenancy
from tests.testing.test_fake_vs_real import WorkerDriver

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

INTERCEPTORS = {"INTERCEPTORS": ["tests.testapp.tenancy.TenantInterceptor"]}


def test_a_tenant_header_crosses_the_worker_to_activities_and_children(start_worker):
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **INTERCEPTORS}):
        worker = start_worker(beat=False, env={"DW_EXTRA_SETTINGS_JSON": json.dumps(INTERCEPTORS)})
        driver = WorkerDriver(worker)
        token = tenancy.current_tenant.set("acme")
        try:
            stub = WorkflowStub.make(tenancy.TenantOrder, "tenant-worker-1")
            stub.start()
            on_loop = WorkflowStub.make(tenancy.TenantAsync, "tenant-worker-async")
            on_loop.start()
            driver.settle()
            stub.signal("poke", "go")
        finally:
            tenancy.current_tenant.reset(token)
        output = stub.result(timeout=60)
        # An async def handle() runs on the worker's event loop, inside the tenant scope.
        assert on_loop.result(timeout=60) == {"label": "async", "tenant": "acme"}

    assert output["headers"] == {"tenant": "acme"}
    assert output["activity"] == {"label": "a", "tenant": "acme", "headers": {"tenant": "acme"}}
    assert output["child"] == {
        "child_headers": {"tenant": "acme"},
        "activity": {"label": "c", "tenant": "acme", "headers": {"tenant": "acme"}},
    }
    [scheduled] = events_of(stub, "ActivityScheduled")
    assert scheduled["headers"] == {"tenant": "acme"}
    # What the worker recorded replays here, without the interceptors configured.
    assert Replayer().replay_run(stub.run_id()).closed_by == "WorkflowCompleted"
