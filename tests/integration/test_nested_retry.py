"""Retry only at the outermost transaction (issue 18, item 13).

A child started from a workflow task is a transaction inside the workflow task's
transaction. When the server refused a statement there, the child's start used to
run again inside the aborted outer transaction and die with ``savepoint ... does not
exist``, hiding the real error and failing the task.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, OperationalError

import durable_workflow as dw
from durable_workflow import Workflow, executor
from durable_workflow.executor.common import retry_transaction
from durable_workflow.models import Task
from durable_workflow.store import database, prepared
from tests.engine_db import connection
from tests.integration.helpers import start
from tests.testapp.composition import ChildEcho
from tests.testapp.workflows import Add

pytestmark = pytest.mark.django_db(transaction=True)


class ActivityThenChild(Workflow):
    """One step that schedules an activity (its task insert waits to be sent) and starts
    a child (whose transaction sends it)."""

    type_key = "tests.activity-then-child"

    def handle(self) -> Any:
        return dw.all([lambda: dw.activity(Add, 1, 2), lambda: dw.child(ChildEcho, 1)])


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's"
)
def test_a_statement_refused_inside_a_child_start_reruns_the_whole_workflow_task(inline):
    start("tests.activity-then-child", "nested-warm")
    inline.run()  # this connection has prepared the step's statements
    stub = start("tests.activity-then-child", "nested-1")
    task = Task.objects.get(run_id=stub.run_id(), status="ready")
    seen: list[str] = []
    refused: list[bool] = []
    errors: list[BaseException] = []

    def lose_statements_after_the_first_query(execute, sql, params, many, context):
        # What a pooler that switched server sessions does between two queries.
        seen.append(sql)
        try:
            return execute(sql, params, many, context)
        except DatabaseError as exc:
            # (The engine's query may run inside another statement's call: count once.)
            if not any(exc is other for other in errors):
                errors.append(exc)
                refused.append(prepared.stale(exc))
            raise
        finally:
            if len(seen) == 1:
                with connection.connection.cursor() as cursor:
                    cursor.execute("DEALLOCATE ALL")

    with connection.execute_wrapper(lose_statements_after_the_first_query):
        assert executor.run_workflow_task(task.id) == "completed"
    assert refused == [True]  # refused once, inside the child's start, then all run again
    assert not any("does not exist" in sql for sql in seen)
    inline.run()
    assert stub.refresh().output() == [3, {"echo": 2}]


def test_a_nested_call_runs_once_and_its_error_reaches_the_outermost_retry():
    calls = {"inner": 0, "outer": 0}

    @retry_transaction
    def inner():
        calls["inner"] += 1
        if calls["inner"] == 1:
            raise OperationalError("database is locked")
        return "done"

    @retry_transaction
    def outer():
        calls["outer"] += 1
        with database.atomic():
            return inner()

    assert outer() == "done"
    assert calls == {"inner": 2, "outer": 2}  # never retried in place, only from the top
