"""``delete_runs`` at scale: every key that names a pruned row is handled, a batch's
statements do not grow with the rows it deletes, and references from rows that stay
are cleared. (Throughput itself is measured by ``bench.sh --scenario prune``.)"""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.db.models import DO_NOTHING
from django.test.utils import CaptureQueriesContext

from durable_workflow import clock
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    HistoryEvent,
    Task,
    WorkflowInstance,
    WorkflowRun,
)
from durable_workflow.operations.prune import (
    CLEARED_FOR_RUN,
    OWNED_BY_RUN,
    REFERENCED,
    delete_runs,
)
from tests.engine_db import connection
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


def _pointing_at(model: type) -> set[tuple[type, str]]:
    """(model, field) of every foreign key to ``model`` that the database keeps
    (hidden ``related_name="+"`` ones included)."""
    return {
        (rel.related_model, rel.field.name)
        for rel in model._meta.get_fields(include_hidden=True)
        if rel.auto_created
        and not rel.concrete
        and (rel.one_to_many or rel.one_to_one)
        and rel.on_delete is not DO_NOTHING
    }


def test_every_foreign_key_to_a_pruned_row_is_deleted_or_cleared():
    handled = set(OWNED_BY_RUN) | set(CLEARED_FOR_RUN) | {(m, "run") for m, _, _ in REFERENCED}
    assert _pointing_at(WorkflowRun) == handled
    for model, _name, pointing in REFERENCED:
        assert _pointing_at(model) == set(pointing), model


def _grow(run_id, count: int) -> None:
    """``count`` more activity executions on the run, each with an attempt and a task."""
    now = clock.now()
    executions = ActivityExecution.objects.bulk_create(
        ActivityExecution(run_id=run_id, sequence=1000 + n, activity_type="t", scheduled_at=now)
        for n in range(count)
    )
    ActivityAttempt.objects.bulk_create(
        ActivityAttempt(execution=e, attempt_number=1, started_at=now) for e in executions
    )
    Task.objects.bulk_create(
        Task(
            run_id=run_id,
            task_type="activity",
            available_at=now,
            created_at=now,
            updated_at=now,
            activity_execution=e,
        )
        for e in executions
    )


def _statements(run_ids) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        delete_runs(run_ids)
    return [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))
    ]


def test_a_batch_sends_as_many_statements_whatever_its_rows(inline):
    small = start("tests.sequential", "batch-small", "ada")
    big = [start("tests.sequential", f"batch-big-{n}", "ada") for n in range(3)]
    inline.run()
    for stub in big:
        _grow(stub.run_id(), 150)  # Django's collector deleted these 100 at a time
    one = _statements([small.run_id()])
    many = _statements([stub.run_id() for stub in big])
    assert len(many) == len(one), "\n".join(many)
    assert len(one) <= 32
    ids = [stub.run_id() for stub in (small, *big)]
    assert not WorkflowRun.objects.filter(id__in=ids).exists()
    for model in (ActivityExecution, Task, HistoryEvent):
        assert not model.objects.filter(run_id__in=ids).exists(), model
    assert not ActivityAttempt.objects.filter(execution__run_id__in=ids).exists()


def test_references_from_rows_that_stay_are_cleared(inline):
    looper = start("tests.looper", "prune-chain", 2)
    first = looper.run_id()
    looper.signal("tick")
    inline.run()
    second = looper.refresh().run_id()
    assert second != first
    clock.advance(dt.timedelta(days=40))
    inline.run()  # the second run's wait times out; it completes now
    assert looper.refresh().status() == "completed"
    kept = start("tests.sequential", "prune-kin", "bob")
    inline.run()
    WorkflowRun.objects.filter(id=kept.run_id()).update(
        parent_run_id=first, reset_from_run_id=first, reset_to_run_id=first
    )
    ChildCall.objects.create(
        parent_run_id=kept.run_id(),
        sequence=99,
        child_instance_id="prune-chain",
        child_workflow_type="tests.looper",
        child_run_id=first,
        status="completed",
        created_at=clock.now(),
    )

    call_command("workflow_prune", "--older-than", "30d", stdout=io.StringIO())

    assert not WorkflowRun.objects.filter(id=first).exists()
    assert WorkflowRun.objects.get(id=second).continued_from_id is None
    row = WorkflowRun.objects.get(id=kept.run_id())
    assert (row.parent_run_id, row.reset_from_run_id, row.reset_to_run_id) == (None, None, None)
    assert ChildCall.objects.get(parent_run_id=kept.run_id(), sequence=99).child_run_id is None
    instance = WorkflowInstance.objects.get(instance_id="prune-chain")  # its last run stays
    assert str(instance.current_run_id) == str(second)
    assert looper.refresh().output()["run_id"] == str(second)


def test_runs_closed_at_the_same_instant_all_go_one_batch_after_another(inline):
    stubs = [start("tests.sequential", f"tie-{n}", "ada") for n in range(5)]
    inline.run()
    ids = [stub.run_id() for stub in stubs]
    instant = clock.now() - dt.timedelta(days=40)
    WorkflowRun.objects.filter(id__in=ids).update(closed_at=instant)
    out = io.StringIO()
    call_command("workflow_prune", "--older-than", "30d", "--batch-size", "2", stdout=out)
    assert "pruned 5 run(s)" in out.getvalue()
    assert not WorkflowRun.objects.filter(id__in=ids).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_indexes is PostgreSQL's")
def test_the_closed_runs_index_holds_only_closed_runs():
    """Each batch walks it from the oldest (a plan on a near-empty table prefers others;
    the plan on a seeded database is in docs/performance.md)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'dw_run_closed'")
        (definition,) = cursor.fetchone()
    assert "(closed_at, id)" in definition
    assert "WHERE (closed_at IS NOT NULL)" in definition
