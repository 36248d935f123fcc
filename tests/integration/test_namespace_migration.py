"""Migration 0019: existing rows move to the default namespace, and it unapplies."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db.migrations.executor import MigrationExecutor

from tests.engine_db import connection

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("durable_workflow", "0018_workflow_queues")]
AFTER = [("durable_workflow", "0019_namespaces")]


def _migrate(target):
    # The engine's database: under the routed tier its tables are not on ``default``.
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_existing_rows_move_to_the_default_namespace_and_back():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    old = _migrate(BEFORE)
    try:
        instance = old.get_model("durable_workflow", "WorkflowInstance").objects.create(
            instance_id="mig-1", workflow_type="t", created_at=now, updated_at=now
        )
        run_id = uuid.uuid4()
        old.get_model("durable_workflow", "WorkflowRun").objects.create(
            id=run_id, instance=instance, workflow_type="t", created_at=now, updated_at=now
        )
        new = _migrate(AFTER)
        row = new.get_model("durable_workflow", "WorkflowInstance").objects.get()
        assert (row.key, row.namespace, row.instance_id) == ("mig-1", "default", "mig-1")
        run = new.get_model("durable_workflow", "WorkflowRun").objects.get()
        assert (run.namespace, run.instance_id) == ("default", "mig-1")
        assert run.instance.key == "mig-1"

        back = _migrate(BEFORE)
        run = back.get_model("durable_workflow", "WorkflowRun").objects.get()
        assert run.instance.instance_id == "mig-1"
        new = _migrate(AFTER)
        new.get_model("durable_workflow", "WorkflowInstance").objects.create(
            key="other/mig-1",
            namespace="other",
            instance_id="mig-1",
            workflow_type="t",
            created_at=now,
            updated_at=now,
        )
        with pytest.raises(RuntimeError, match="outside the 'default' namespace"):
            _migrate(BEFORE)
        new.get_model("durable_workflow", "WorkflowInstance").objects.filter(
            namespace="other"
        ).delete()
    finally:
        _migrate(_latest())  # every later migration too, for the tests that follow


def _latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes("durable_workflow")
