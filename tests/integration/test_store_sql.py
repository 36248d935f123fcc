"""The hot path's hand-built statements store and read exactly what the ORM does."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import IntegrityError

from durable_workflow import clock
from durable_workflow.models import HistoryEvent, Task, WorkflowRun
from durable_workflow.store import database, roundtrips, sql
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import built_task, start

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = sql.Table(Task)
EVENTS = sql.Table(HistoryEvent)


@pytest.fixture
def run_id(inline) -> uuid.UUID:
    return uuid.UUID(start("tests.sequential", "sql-1", "ada").run_id())


def built(run_id: uuid.UUID, **fields) -> Task:
    return built_task(
        run_id, payload={"nested": {"list": [1, "two", None], "flag": True}}, **fields
    )


def test_an_inserted_row_reads_back_through_the_orm_unchanged(run_id):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    stored = Task.objects.get(id=row.id)
    for field in Task._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(row, field.attname), field.name


def test_select_converts_like_the_orm(run_id):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    names = ("id", "run_id", "payload", "available_at", "lease_id", "attempt_count")
    (values,) = TASKS.select(names, [("id", "=", row.id)])
    orm = Task.objects.values_list(*names).get(id=row.id)
    assert tuple(values) == orm
    assert isinstance(values[0], uuid.UUID) and values[2]["nested"]["list"] == [1, "two", None]
    assert values[3].tzinfo is not None


def test_string_keys_and_every_operator(run_id):
    first, second = built(run_id), built(run_id)
    TASKS.insert([sql.values(first)])
    TASKS.insert([sql.values(second)])
    later = clock.now() + dt.timedelta(hours=1)
    where = [
        ("run_id", "=", str(run_id)),  # a string id matches like a UUID does
        ("id", "IN", [str(first.id), second.id]),
        ("id", "<>", second.id),
        ("available_at", "<=", later),
        ("lease_id", "IS NULL", None),
    ]
    assert [r[0] for r in TASKS.select(["id"], where)] == [first.id]
    changed = TASKS.update(
        {"attempt_count": sql.Add(2), "last_error": "x", "lease_expires_at": later}, where
    )
    assert changed == 1
    stored = Task.objects.get(id=first.id)
    assert (stored.attempt_count, stored.last_error, stored.lease_expires_at) == (2, "x", later)
    assert not TASKS.exists([("id", "=", uuid.uuid4())])


def test_insert_splits_batches_the_backend_accepts(run_id):
    rows = [
        {
            "run_id": run_id,
            "sequence": 10_000 + n,
            "event_type": "SideEffectRecorded",
            "payload": {"n": n},
            "recorded_at": clock.now(),
        }
        for n in range(450)  # 2,250 parameters: over SQLite's 999
    ]
    EVENTS.insert(rows)
    assert HistoryEvent.objects.filter(run_id=run_id, sequence__gte=10_000).count() == 450


def test_deferred_writes_travel_together_and_in_order(run_id):
    """On PostgreSQL; on SQLite the same block runs statement by statement."""
    first, second = built(run_id), built(run_id)
    sent: list[str] = []

    def record(execute, statement, params, many, context):  # what reaches the driver
        sent.append(statement)
        return execute(statement, params, many, context)

    with database.atomic(), sql.batched(WorkflowRun), connection.execute_wrapper(record):
        TASKS.insert([sql.values(first)], defer=True)
        TASKS.update({"last_error": "then"}, [("id", "=", first.id)], defer=True)
        # A read sends what waits first, then runs: it sees both writes.
        found = TASKS.select(["id", "last_error"], [("run_id", "=", run_id)])
        assert (first.id, "then") in {tuple(r) for r in found}
        TASKS.insert([sql.values(second)], defer=True)
        TASKS.update({"last_error": "last"}, [("id", "=", second.id)], defer=True)
    assert Task.objects.get(id=second.id).last_error == "last"
    if connection.vendor == "postgresql":
        # One round trip: the two statements that waited, then the read, whose rows
        # are the ones the cursor shows. (The last two writes go when the block ends.)
        assert len(sent) == 1, sent
        # (Each statement as text or as the EXECUTE of a prepared one.)
        kinds = sql_text.kinds(sent[0])
        assert [verb for verb, _ in kinds] == ["INSERT", "UPDATE", "SELECT"]
        assert kinds[-1] == ("SELECT", Task._meta.db_table)
    else:  # every statement on its own
        assert len(sent) == 5, sent


def test_statements_not_the_engines_reach_the_driver_untouched_and_in_order(run_id):
    """An ORM query on an engine model inside the engine's block first sends what the
    engine held back (its manager flushes), then goes to the driver exactly as it was
    written, in a round trip of its own. Other code runs in ``sql.orm()``, which does
    the same. A nested ``database.atomic()`` is the engine's savepoint, held back
    with the writes."""
    first, second = built(run_id), built(run_id)
    TASKS.insert([sql.values(first)])

    def orm():  # built where it runs: building it is what sends the held-back writes
        return Task.objects.filter(id=first.id).values_list("last_error", flat=True)

    alone, record_alone = _sent_to_driver(with_params=True)
    with connection.execute_wrapper(record_alone):
        assert list(orm()) == [""]
    sent, record = _sent_to_driver(with_params=True)
    with sql.atomic(WorkflowRun):
        TASKS.update({"last_error": "held back"}, [("id", "=", first.id)], defer=True)
        # Installed inside the block, so it sees what the engine hands the driver.
        with connection.execute_wrapper(record):
            assert list(orm()) == ["held back"]
            with database.atomic():
                TASKS.insert([sql.values(second)], defer=True)
                TASKS.update({"last_error": "inside"}, [("id", "=", second.id)], defer=True)
            # No other statement may run now (on SQLite the engine holds nothing back).
            assert roundtrips.holding(connection) == (connection.vendor == "postgresql")
            with sql.orm(), connection.cursor() as cursor:
                assert not roundtrips.holding(connection)
                cursor.execute("SELECT %s || ''", ["mine"])
                assert cursor.fetchone() == ("mine",)
    assert Task.objects.get(id=second.id).last_error == "inside"
    raw = ("SELECT %s || ''", ["mine"])
    if connection.vendor == "postgresql":
        held, orm_query, nested, raw_query = sent
        # What the engine held back went first, in a round trip of its own...
        assert [verb for verb, _ in sql_text.kinds(held[0])] == ["BEGIN", "UPDATE"]
        # ... then the ORM query as it is outside any block: the same text and values.
        assert orm_query == alone[0]
        # The savepoint, released before anything of it went, left no trace.
        kinds = sql_text.kinds(nested[0])
        assert [verb for verb, _ in kinds] == ["INSERT", "UPDATE"], kinds
        assert raw_query == raw
    else:  # every statement on its own, as written (the engine's write ran at once)
        orm_query, savepoint, _insert, _update, release, raw_query = sent
        assert orm_query == alone[0] and raw_query == raw
        assert savepoint[0].startswith("SAVEPOINT") and release[0].startswith("RELEASE")


def test_a_query_refused_before_the_driver_leaves_the_held_back_writes_waiting(run_id):
    """A wrapper (the guard against queries from a workflow body is one) may refuse
    the query that carries the held-back writes (here the one an ORM query sends
    first) before it reaches the driver: they still wait, with the transaction's
    BEGIN, and go with the block's end."""
    row = built(run_id)

    def refuse(execute, statement, params, many, context):
        raise RuntimeError("refused before the driver")

    with sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(row)], defer=True)
        with connection.execute_wrapper(refuse), pytest.raises(RuntimeError):
            Task.objects.filter(id=row.id).exists()
    assert Task.objects.filter(id=row.id).exists()


def _sent_to_driver(*, with_params: bool = False) -> tuple[list, object]:
    sent: list = []

    def record(execute, statement, params, many, context):
        sent.append((statement, list(params or [])) if with_params else statement)
        return execute(statement, params, many, context)

    return sent, record


def test_the_last_batch_carries_the_commit(run_id):
    row = built(run_id)
    sent, record = _sent_to_driver()
    committed: list[bool] = []
    with connection.execute_wrapper(record), sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(row)], defer=True)
        database.on_commit(lambda: committed.append(Task.objects.filter(id=row.id).exists()))
    if connection.vendor == "postgresql":
        # The insert and the COMMIT in one round trip, then the hook's read.
        assert len(sent) == 2 and sent[0].endswith(";\nCOMMIT"), sent
    assert committed == [True]  # on_commit hooks still run, after the data is there


@pytest.mark.parametrize("first", ["engine statement", "ORM statement", "executemany"])
def test_the_first_query_begins_the_transaction(run_id, first):
    """The BEGIN travels with the block's first query, whatever that query is (an ORM
    query on an engine model sends it first; other code runs in ``sql.orm()``, which
    does): what the block wrote before it failed is rolled back, and the driver is
    left as Django expects it."""
    row, other = built(run_id), built(run_id)
    TASKS.insert([sql.values(other)])
    with pytest.raises(RuntimeError), sql.atomic(WorkflowRun):
        if first == "engine statement":
            TASKS.insert([sql.values(row)])
        elif first == "ORM statement":
            Task.objects.filter(id=other.id).update(last_error="written")
        else:  # a raw cursor is not the engine's: it runs in sql.orm()
            with sql.orm(), connection.cursor() as cursor:
                cursor.executemany(
                    f"UPDATE {Task._meta.db_table} SET last_error = %s WHERE id = %s",
                    [("written", TASKS._prep("id", other.id, connection))],
                )
        TASKS.update({"last_error": "then"}, [("id", "=", other.id)], defer=True)
        raise RuntimeError("the block fails after writing")
    assert not Task.objects.filter(id=row.id).exists()
    assert Task.objects.get(id=other.id).last_error == ""
    assert connection.get_autocommit() and not connection.in_atomic_block
    if connection.vendor == "postgresql":
        assert connection.connection.autocommit
        assert connection.connection.info.transaction_status == 0  # idle


def test_an_empty_block_sends_nothing(run_id):
    sent, record = _sent_to_driver()
    with connection.execute_wrapper(record), sql.atomic(WorkflowRun):
        pass
    if connection.vendor == "postgresql":
        assert sent == []  # (SQLite begins every transaction the same way)
    with sql.atomic(WorkflowRun):  # and the next block works as ever
        Task.objects.filter(run_id=run_id).update(last_error="next")
    assert set(Task.objects.filter(run_id=run_id).values_list("last_error", flat=True)) == {"next"}


def test_a_nested_batch_leaves_the_commit_to_the_outer_block(run_id):
    row = built(run_id)
    sent, record = _sent_to_driver()
    with connection.execute_wrapper(record), database.atomic():
        with sql.atomic(WorkflowRun):
            TASKS.insert([sql.values(row)], defer=True)
        assert not any("COMMIT" in statement for statement in sent), sent
        TASKS.update({"last_error": "after"}, [("id", "=", row.id)])
    assert Task.objects.get(id=row.id).last_error == "after"


def test_a_batch_in_a_block_it_does_not_own_never_commits_it(run_id):
    row = built(run_id)
    with pytest.raises(RuntimeError), database.atomic():
        with sql.batched(WorkflowRun):
            TASKS.insert([sql.values(row)], defer=True)
        raise RuntimeError("the block goes on after the batch, and fails")
    assert not Task.objects.filter(id=row.id).exists()


def test_a_constraint_checked_at_commit_fails_the_block(run_id):
    orphan = built(uuid.uuid4())  # no such run: the foreign key is checked at COMMIT
    with pytest.raises(IntegrityError), sql.atomic(WorkflowRun):
        TASKS.insert([sql.values(orphan)], defer=True)
    assert not Task.objects.filter(id=orphan.id).exists()
    assert Task.objects.filter(run_id=run_id).exists()  # the connection works on


def test_a_failing_deferred_write_fails_the_transaction(run_id):
    row = built(run_id)
    with pytest.raises(IntegrityError), database.atomic(), sql.batched(WorkflowRun):
        TASKS.insert([sql.values(row)], defer=True)
        TASKS.insert([sql.values(row)], defer=True)  # the same id twice
    assert not Task.objects.filter(id=row.id).exists()


def test_a_rolled_back_savepoint_takes_its_deferred_writes_along(run_id):
    kept, dropped = built(run_id), built(run_id)
    with database.atomic(), sql.batched(WorkflowRun):
        TASKS.insert([sql.values(kept)], defer=True)
        with pytest.raises(RuntimeError), database.atomic():
            TASKS.insert([sql.values(dropped)], defer=True)
            raise RuntimeError("undo")
    assert Task.objects.filter(id=kept.id).exists()
    assert not Task.objects.filter(id=dropped.id).exists()


def test_outside_a_batch_a_deferred_write_runs_at_once(run_id):
    row = built(run_id)
    with database.atomic():
        TASKS.insert([sql.values(row)], defer=True)
        assert Task.objects.filter(id=row.id).exists()


def test_several_truths_in_one_read(run_id):
    row = built(run_id)
    TASKS.insert([sql.values(row)])
    mine = TASKS.exists_clause([("id", "=", row.id)])
    other = TASKS.exists_clause([("id", "=", uuid.uuid4())])
    assert sql.truths(Task, [mine, other, mine]) == [True, False, True]


def test_statements_together_each_read_after_the_one_before(run_id):
    row = built(run_id)
    row.last_error = "new"
    TASKS.insert([sql.values(row)])
    mine = [("run_id", "=", run_id), ("task_type", "=", "activity")]
    # One round trip on PostgreSQL: an update, then reads that see it, one of them
    # through a subquery condition.
    renamed, rows, through = sql.together(
        Task,
        [
            TASKS.update_statement({"last_error": "seen"}, [("id", "=", row.id)]),
            TASKS.select_statement(["id", "last_error"], mine),
            TASKS.select_statement(
                ["id"], [("id", "IN SELECT", TASKS.select_statement(["id"], mine, limit=1))]
            ),
        ],
    )
    assert renamed == 1
    assert [tuple(r) for r in rows] == [(row.id, "seen")]
    assert through == [[row.id]]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="client-side binding is psycopg's")
def test_values_are_rendered_as_the_driver_renders_them():
    import decimal

    from psycopg.types.json import Jsonb

    from durable_workflow.models import TaskStatus
    from durable_workflow.store import literals

    values = [
        "it's 50% off",
        "plain",
        "back\\slash",
        "naïve ünïcode",
        None,
        uuid.uuid4(),
        dt.datetime(2026, 11, 29, 12, 30, tzinfo=dt.UTC),
        dt.datetime(2026, 11, 29, 12, 30, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
        dt.datetime(2026, 11, 29, 12, 30),
        decimal.Decimal("1.50"),
        b"\x00\xff%",
        True,
        False,
        0,
        -7,
        10**15,
        2**70,
        Jsonb({"percent": "%s %%", "list": [1, None]}),
        TaskStatus.READY,
    ]
    text = "SELECT " + ", ".join(["%s"] * len(values)) + ", '100%%'"
    connection.ensure_connection()
    with connection.cursor() as cursor:
        raw = cursor.cursor
        assert literals.bound(raw, text, values) == raw.mogrify(text, values)
        cursor.execute(literals.bound(raw, text, values))
        row = cursor.fetchone()
    assert list(row[:5]) == ["it's 50% off", "plain", "back\\slash", "naïve ünïcode", None]
    assert row[-1] == "100%"


def test_a_built_row_holds_what_an_unsaved_instance_holds(run_id):
    """sql.Built stands for an unsaved model instance: the same columns, the same defaults."""
    fields = sql.values(built(run_id))
    assert sql.values(Task(**fields)) == fields
    bare = sql.Built(Task, id=uuid.uuid4(), run_id=run_id)
    instance = Task(id=bare.id, run_id=run_id)
    assert sql.values(bare) == sql.values(instance)
