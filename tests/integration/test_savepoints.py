"""The engine's savepoints: held back with its writes, undone on an error, and the
``on_commit`` callbacks registered inside them kept or dropped with them."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, transaction

from durable_workflow.models import Task, WorkflowRun
from durable_workflow.store import database, roundtrips, sql
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import built_task, start

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = sql.Table(Task)
POSTGRES = connection.vendor == "postgresql"


@pytest.fixture
def run_id(inline) -> uuid.UUID:
    return uuid.UUID(start("tests.sequential", "savepoint-1", "ada").run_id())


def _recording() -> tuple[list[str], object]:
    sent: list[str] = []

    def record(execute, statement, params, many, context):
        sent.append(statement)
        return execute(statement, params, many, context)

    return sent, record


def test_a_released_savepoint_hands_its_callbacks_on_in_order(run_id):
    ran: list[str] = []
    row = built_task(run_id)
    with sql.atomic(WorkflowRun):
        database.on_commit(lambda: ran.append("before"))
        with sql.savepoint(WorkflowRun):
            TASKS.insert([sql.values(row)], defer=True)
            database.on_commit(lambda: ran.append("inside"))
            with sql.savepoint(WorkflowRun):
                database.on_commit(lambda: ran.append("innermost"))
        database.on_commit(lambda: ran.append("after"))
        assert ran == []
    assert ran == ["before", "inside", "innermost", "after"]
    assert Task.objects.filter(id=row.id).exists()


def test_a_rolled_back_savepoint_drops_its_writes_and_callbacks(run_id):
    ran: list[str] = []
    kept, dropped = built_task(run_id), built_task(run_id)
    sent, record = _recording()
    with connection.execute_wrapper(record), sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(kept)], defer=True)
        with pytest.raises(RuntimeError), sql.savepoint(WorkflowRun):
            TASKS.insert([sql.values(dropped)], defer=True)
            database.on_commit(lambda: ran.append("dropped"))
            with sql.savepoint(WorkflowRun):
                database.on_commit(lambda: ran.append("dropped too"))
            raise RuntimeError("undo")
        database.on_commit(lambda: ran.append("kept"))
    assert ran == ["kept"]
    assert Task.objects.filter(id=kept.id).exists()
    assert not Task.objects.filter(id=dropped.id).exists()
    if POSTGRES:
        # Nothing of the savepoint ever left: one round trip, the kept write and COMMIT.
        assert len(sent) == 1, sent
        assert [verb for verb, _ in sql_text.kinds(sent[0])] == ["BEGIN", "INSERT", "COMMIT"]


def test_a_savepoint_rolled_back_after_it_was_sent(run_id):
    """The rollback goes with the next query; what was sent inside is undone."""
    ran: list[str] = []
    kept, dropped, later = built_task(run_id), built_task(run_id), built_task(run_id)
    sent, record = _recording()
    with connection.execute_wrapper(record), sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(kept)], defer=True)
        with pytest.raises(RuntimeError), sql.savepoint(WorkflowRun):
            TASKS.insert([sql.values(dropped)], defer=True)
            database.on_commit(lambda: ran.append("dropped"))
            assert TASKS.exists([("id", "=", dropped.id)])  # sends what waits
            TASKS.update({"last_error": "x"}, [("id", "=", dropped.id)], defer=True)
            raise RuntimeError("undo")
        TASKS.insert([sql.values(later)], defer=True)
    assert ran == []
    assert not Task.objects.filter(id=dropped.id).exists()
    assert Task.objects.filter(id__in=[kept.id, later.id]).count() == 2
    if POSTGRES:
        assert len(sent) == 2, sent
        verbs = [verb for verb, _ in sql_text.kinds(sent[1])]
        assert verbs == ["ROLLBACK", "INSERT", "COMMIT"], verbs


def test_a_database_error_inside_a_savepoint_leaves_the_transaction_usable(run_id):
    row, after = built_task(run_id), built_task(run_id)
    TASKS.insert([sql.values(row)])
    with sql.atomic(WorkflowRun):
        TASKS.update({"last_error": "kept"}, [("id", "=", row.id)], defer=True)
        with pytest.raises(IntegrityError), sql.savepoint(WorkflowRun):
            TASKS.insert([sql.values(row)])  # the same id again: refused at once
        TASKS.insert([sql.values(after)], defer=True)
    assert Task.objects.get(id=row.id).last_error == "kept"
    assert Task.objects.filter(id=after.id).exists()


def test_project_code_runs_in_a_savepoint_of_djangos_own(run_id):
    """Inside one of the engine's savepoints, code that is not the engine's gets a
    Django savepoint: its own ``transaction.on_commit`` callbacks and
    ``set_rollback()`` mean what they mean anywhere."""
    ran: list[str] = []
    row, undone = built_task(run_id), built_task(run_id)
    alias = database.alias()
    with sql.atomic(WorkflowRun), sql.savepoint(WorkflowRun):
        TASKS.insert([sql.values(row)], defer=True)
        with sql.foreign(WorkflowRun):
            assert not roundtrips.holding(connection)
            Task.objects.filter(id=row.id).update(last_error="by the project")
            transaction.on_commit(lambda: ran.append("project"), using=alias)
        with sql.foreign(WorkflowRun):
            TASKS.insert([sql.values(undone)], defer=True)  # the engine, called back
            transaction.on_commit(lambda: ran.append("rolled back"), using=alias)
            transaction.set_rollback(True, using=alias)
    assert ran == ["project"]
    assert Task.objects.get(id=row.id).last_error == "by the project"
    assert not Task.objects.filter(id=undone.id).exists()


def test_outside_the_engines_block_a_savepoint_is_djangos(run_id):
    ran: list[str] = []
    with database.atomic():
        with pytest.raises(RuntimeError), sql.savepoint(WorkflowRun):
            database.on_commit(lambda: ran.append("dropped"))
            raise RuntimeError("undo")
        with sql.savepoint(WorkflowRun):
            database.on_commit(lambda: ran.append("kept"))
    assert ran == ["kept"]
