"""Prepared statements on PostgreSQL (durable_workflow.store.prepared).

The engine's own statements are prepared once per connection and sent as EXECUTEs;
these tests check that the text reaching the driver is what the record says, that
results are the same, and that the engine recovers when the server's statements are
not what it recorded.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import DatabaseError, IntegrityError
from django.test import override_settings

from durable_workflow import executor
from durable_workflow.executor.common import retry_transaction
from durable_workflow.models import Task
from durable_workflow.store import database, prepared, sql
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import built_task, start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's"
    ),
]

TASKS = sql.Table(Task)


@pytest.fixture(autouse=True)
def fresh_connection():
    """Nothing prepared yet (the test connection outlives each test)."""
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    prepared._records.pop(connection.connection, None)


@pytest.fixture
def run_id(inline) -> uuid.UUID:
    return uuid.UUID(start("tests.sequential", "prep-1", "ada").run_id())


@pytest.fixture
def sent():
    texts: list[str] = []

    def record(execute, statement, params, many, context):
        texts.append(statement)
        return execute(statement, params, many, context)

    with connection.execute_wrapper(record):
        yield texts


def built(run_id: uuid.UUID) -> Task:
    return built_task(run_id, payload={"k": [1, "two"]})


def server_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall()}


def read(task_id) -> list[list]:
    return TASKS.select(["id", "payload", "available_at"], [("id", "=", task_id)])


def test_a_statement_is_prepared_once_then_executed(run_id, sent):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    first = read(row.id)
    second = read(row.id)
    assert first == second == [[row.id, {"k": [1, "two"]}, row.available_at]]
    _insert, select_once, select_again = sent
    assert select_once.startswith("PREPARE dw_select_durable_workflow_task_")
    assert select_again.startswith("EXECUTE dw_select_durable_workflow_task_")
    assert sql_text.kinds(select_once) == sql_text.kinds(select_again)
    assert select_again.split("(")[0].split()[1] in server_names()


def test_turned_off_by_the_setting_or_for_a_transaction_mode_pooler(run_id, sent):
    row = built(run_id)
    with override_settings(DURABLE_WORKFLOW={"PREPARED_STATEMENTS": False}):
        TASKS.insert([sql.values(row)])
        read(row.id)
    connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
    try:
        read(row.id)
    finally:
        del connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"]
    assert [text.split()[0] for text in sent] == ["INSERT", "SELECT", "SELECT"]


def test_a_large_statement_goes_as_text(run_id, sent):
    rows = [built(run_id) for _ in range(prepared.MAX_PARAMS // len(sql.values(built(run_id))) + 1)]
    TASKS.insert([sql.values(row) for row in rows])
    assert sent[0].startswith("INSERT INTO")
    assert Task.objects.filter(id__in=[row.id for row in rows]).count() == len(rows)


def test_after_a_failed_query_the_server_is_asked_what_it_prepared(run_id, sent):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    duplicate = sql.Statement(*_insert_of(row), lambda cursor: None)
    fresh = TASKS.select_statement(["status"], [("id", "=", row.id), ("run_id", "=", run_id)])
    with pytest.raises(IntegrityError), database.atomic():
        sql.together(Task, [fresh, duplicate])  # PREPAREs run, then the insert fails
    sent.clear()
    assert sql.together(Task, [fresh]) == [[["ready"]]]
    # The statement prepared before the failure is used, not prepared a second time
    # (which the server would refuse).
    assert sent[-1].startswith("EXECUTE "), sent


def test_statements_gone_from_the_server_are_prepared_again(run_id):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    read(row.id)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's DISCARD ALL does

    calls = []

    @retry_transaction
    def reading():
        calls.append(1)
        with database.atomic():
            return read(row.id)

    assert reading() == [[row.id, {"k": [1, "two"]}, row.available_at]]
    assert len(calls) == 2  # refused once (statement missing), then prepared again


def test_a_stale_statement_is_retried_only_once():
    calls = []

    @retry_transaction
    def always_stale():
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("EXECUTE dw_missing_0000000000000000")

    with pytest.raises(DatabaseError) as raised:
        always_stale()
    assert prepared.stale(raised.value) and len(calls) == 2


def test_a_workflow_runs_on_after_the_statements_vanish(inline):
    stub = start("tests.many-steps", "prep-vanish", 6)
    with override_settings(DURABLE_WORKFLOW={"EAGER_CHAIN_LIMIT": 2}):
        first = Task.objects.get(run_id=stub.run_id(), status="ready")
        executor.run_workflow_task(first.id)  # the first steps: a step's statements prepared
        assert stub.refresh().status() != "completed"
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
        refused = []

        def watch(execute, statement, params, many, context):
            try:
                return execute(statement, params, many, context)
            except DatabaseError as exc:
                refused.append(prepared.stale(exc))
                raise

        with connection.execute_wrapper(watch):
            inline.run()
    assert stub.refresh().output() == sum(range(6))
    assert refused == [True]  # one transaction refused, run again, and nothing else


def _insert_of(row: Task) -> tuple[str, list]:
    values = sql.values(row)
    conn = TASKS.connection()
    names = tuple(values)
    return TASKS._insert_sql(names, 1), [TASKS._prep(name, values[name], conn) for name in names]
