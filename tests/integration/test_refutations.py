"""A refuted expectation is recognised by its SQLSTATE, whatever the server's words.

The engine sends some answers it assumes as expectations (``store.expectations``):
statements that fail the transaction unless the database agrees. The executor tells
such a failure from any other by the code ``DW001`` alone.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import DatabaseError

from durable_workflow.models import Task, WorkflowRun
from durable_workflow.store import database, expectations, sql
from tests.engine_db import connection
from tests.integration.helpers import built_task, start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="the engine assumes answers only where writes wait (PostgreSQL)",
    ),
]

TASKS = sql.Table(Task)


@pytest.fixture
def run_id(inline) -> uuid.UUID:
    return uuid.UUID(start("tests.sequential", "refute-1", "ada").run_id())


def _refuted_block(run_id: uuid.UUID) -> DatabaseError:
    """A block that writes a task, then expects a row that is not there."""
    written = built_task(run_id)
    missing = TASKS.select_statement(["id"], [("id", "=", uuid.uuid4())], for_update=True)
    with pytest.raises(DatabaseError) as caught, sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(written)], defer=True)
        sql.defer_all(WorkflowRun, [sql.expect_rows(missing, 1)])
    assert not Task.objects.filter(id=written.id).exists()  # the whole block went back
    return caught.value


def _sqlstate(exc: BaseException | None) -> str | None:
    while exc is not None:
        if getattr(exc, "sqlstate", None):
            return str(exc.sqlstate)  # type: ignore[attr-defined]
        exc = exc.__cause__
    return None


def test_a_refuted_expectation_fails_the_block_with_the_engines_code(run_id):
    failed = _refuted_block(run_id)
    assert _sqlstate(failed) == expectations.REFUTED_SQLSTATE
    assert sql.refuted(failed)


def test_an_expectation_that_holds_lets_the_block_commit(run_id):
    written = built_task(run_id)
    TASKS.insert([sql.values(written)])
    there = TASKS.select_statement(["id"], [("id", "=", written.id)], for_update=True)
    nothing_open = TASKS.exists_clause([("id", "=", uuid.uuid4())])
    with sql.atomic(WorkflowRun):
        TASKS.update({"last_error": "kept"}, [("id", "=", written.id)], defer=True)
        sql.defer_all(WorkflowRun, [sql.expect_rows(there, 1), sql.expect_false([nothing_open])])
    assert Task.objects.get(id=written.id).last_error == "kept"


def test_recognised_whatever_language_the_server_speaks(run_id):
    """The server's messages follow ``lc_messages``; the code does not. (A server built
    without translations, or without the locale, keeps English: the check is the same.)"""
    with connection.cursor() as cursor:
        try:
            with database.atomic():
                cursor.execute("SET lc_messages TO 'de_DE.UTF-8'")
        except DatabaseError:
            pass  # the locale is not installed on this server
    try:
        failed = _refuted_block(run_id)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lc_messages")
    assert sql.refuted(failed)


def test_recognised_by_code_never_by_words():
    """Any wording with the engine's code is a refutation; the engine's old wording under
    another code is not."""
    raising = "DO $$ BEGIN RAISE EXCEPTION 'ganz andere Worte' USING ERRCODE = 'DW001'; END $$"
    with pytest.raises(DatabaseError) as coded, database.atomic(), connection.cursor() as cursor:
        cursor.execute(raising)
    assert sql.refuted(coded.value)
    for words in ("dw:expectation refuted", "durable_workflow: expectation refuted: rows"):
        with (
            pytest.raises(DatabaseError) as worded,
            database.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("SELECT CAST(%s AS integer)", [words])
        assert words in str(worded.value)
        assert not sql.refuted(worded.value)
