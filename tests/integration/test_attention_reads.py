"""What the runs list's attention badges read: a few index entries per run of the page,
not every run, task or timer of a kind (on a million runs the parked kind once walked
the runs' primary key and took 3 s for a page of 50)."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from django.conf import settings
from django.db import connections
from django.test.utils import CaptureQueriesContext

from durable_workflow import namespaces
from durable_workflow.ids import uuid7
from durable_workflow.models import Task, WorkflowInstance, WorkflowRun
from durable_workflow.operations.attention import attention_of
from durable_workflow.store import database
from tests.integration.helpers import start
from tests.integration.test_doctor import fail_a_workflow_task, run_next

pytestmark = pytest.mark.django_db(transaction=True)

OTHERS = 2_000


def badges_and_buffers(run_ids: list) -> tuple[dict, int]:
    """The page's badges, and the buffers PostgreSQL touched answering them."""
    connection = connections[database.alias()]
    with CaptureQueriesContext(connection) as captured:
        badges = attention_of(run_ids)
    [sql] = [q["sql"] for q in captured.captured_queries if "dw_parked" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    top = plan[0]["Plan"]
    return badges, top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def add_other_troubled_runs(like: WorkflowRun, failed: Task) -> None:
    """``OTHERS`` open runs off the page: each parked on a failed workflow task, every
    other one also with a ready workflow task failing on a queue nobody consumes."""
    instance = WorkflowInstance.objects.get(namespace=like.namespace, instance_id=like.instance_id)
    instances, runs, tasks = [], [], []
    for index in range(OTHERS):
        name = f"reads-other-{index}"
        row = copy.copy(instance)
        row.key, row.instance_id, row.current_run_id = (
            namespaces.instance_key(like.namespace, name),
            name,
            None,
        )
        instances.append(row)
        run = copy.copy(like)
        run.pk, run.instance_id = uuid7(), name
        runs.append(run)
        task = copy.copy(failed)
        task.pk, task.run_id = uuid7(), run.pk
        tasks.append(task)
        if index % 2:
            poison = copy.copy(failed)
            poison.pk, poison.run_id = uuid7(), run.pk
            poison.status, poison.attempt_count, poison.queue = "ready", 1, "nobody-consumes"
            tasks.append(poison)
    WorkflowInstance.objects.bulk_create(instances)
    WorkflowRun.objects.bulk_create(runs)
    Task.objects.bulk_create(tasks)
    with connections[database.alias()].cursor() as cursor:
        cursor.execute("ANALYZE durable_workflow_run, durable_workflow_task")


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3",
    reason="buffers read are PostgreSQL's EXPLAIN (ANALYZE, BUFFERS)",
)
def test_a_page_reads_as_much_whatever_the_other_runs_need(inline, monkeypatch):
    parked = fail_a_workflow_task("reads-page-parked", monkeypatch)
    waiting = start("tests.sequential", "reads-page-waiting", "ada")
    assert run_next(waiting, "workflow") == "completed"  # waits on its activity
    page = [uuid.UUID(str(stub.run_id())) for stub in (parked, waiting)]

    badges, before = badges_and_buffers(page)
    assert badges[page[0]] == ["parked"]
    assert "parked" not in badges[page[1]]  # (no worker consumes its queue here)

    run = WorkflowRun.objects.get(pk=parked.run_id())
    failed = Task.objects.get(run=run, task_type="workflow", status="failed")
    add_other_troubled_runs(run, failed)

    badges_after, after = badges_and_buffers(page)
    assert badges_after == badges
    # A correlated lookup per run of the page: an index level more at most, not the
    # 2,000 parked and 1,000 failing runs off the page.
    assert after <= before + 20, (before, after)


def test_parked_runs_are_asked_from_their_failed_tasks():
    """The dashboard's count, the metrics and the "needs attention" filter ask for
    parked runs through a sub-query of failed workflow tasks that checks each one's run
    is open. Without that check inside it, PostgreSQL merged the failed tasks' runs with
    the open runs along the runs' primary key, or hashed every workflow task, on a
    million runs: 6 to 16 s for a count of none (the plan is not reproducible on a test
    database; this pins the statement's shape)."""
    from durable_workflow.operations.queries import runs_stopped_on_failed_task

    sql = str(runs_stopped_on_failed_task().values("pk").query)
    inner = sql[sql.index("IN (SELECT") :]
    assert '"durable_workflow_task"' in inner
    assert 'EXISTS(SELECT 1 AS "a" FROM "durable_workflow_run"' in inner.replace("\n", " ")
