"""Workers whose connections die, or whose tasks keep failing on them (issue 30, item 3).

With ``CELERY_DB_REUSE_MAX`` (which the deployment docs recommend) Celery leaves a
worker's connection open between tasks, so one connection the server dropped failed
every later task of that process ("the connection is lost", 417 tasks over 7 minutes),
while its registration heartbeat, on a connection of its own, kept it live and sticky
routing kept sending it its warm runs (8 runs stuck). Real worker processes, real
PostgreSQL backends terminated with ``pg_terminate_backend`` (only this test's
workers', found by their ``application_name``).
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from durable_workflow import WorkflowStub
from durable_workflow.models import Task, WorkerRegistration
from tests.acceptance.conftest import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def terminate_backends(application_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            [application_name],
        )
        return int(cursor.fetchone()[0])


def worker_env(name: str, **more: str) -> dict[str, str]:
    return {"DW_PG_APPLICATION_NAME": name, "DW_CELERY_DB_REUSE_MAX": "1000", **more}


def waiting_run(instance_id: str) -> WorkflowStub:
    stub = WorkflowStub.make("tests.child-echo", instance_id)
    stub.start(1, "wait")
    wait_for(lambda: stub.refresh().status() == "waiting", timeout=30, message="run did not wait")
    return stub


def test_a_worker_whose_connection_was_terminated_goes_on_working(start_worker):
    name = f"dw-fault-{uuid.uuid4().hex[:8]}"
    worker = start_worker(env=worker_env(name))
    stubs = [waiting_run(f"conn-lost-{index}") for index in range(3)]
    assert terminate_backends(name) >= 1  # the connection the worker keeps between tasks
    for stub in stubs:
        stub.signal("poke", "after")
    for stub in stubs:
        stub.wait(timeout=30)
        assert stub.refresh().output() == [1, "after"]
    assert "the connection is lost" not in worker.output()


@pytest.fixture
def failing_task_writes():
    """Make one application's writes to the task table fail the way a lost database does
    (SQLSTATE 57P03), while everything else it writes (its heartbeat) still works."""
    created: list[str] = []

    def install(application_name: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION dw_test_refuse_tasks() RETURNS trigger AS $$ "
                "BEGIN IF current_setting('application_name') = '" + application_name + "' "
                "THEN RAISE EXCEPTION 'the database system is not accepting this worker' "
                "USING ERRCODE = '57P03'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER dw_test_refuse_tasks BEFORE UPDATE ON durable_workflow_task "
                "FOR EACH ROW EXECUTE FUNCTION dw_test_refuse_tasks()"
            )
        created.append(application_name)

    yield install
    if created:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS dw_test_refuse_tasks ON durable_workflow_task")
            cursor.execute("DROP FUNCTION IF EXISTS dw_test_refuse_tasks()")


def test_a_worker_whose_tasks_keep_failing_stops_being_a_sticky_owner(
    start_worker, failing_task_writes, monkeypatch
):
    monkeypatch.setenv("DW_WORKER_HEARTBEAT_SECONDS", "0.5")
    monkeypatch.setenv("DW_REDISPATCH_MAX_BACKOFF_SECONDS", "2")
    owner_name = f"dw-owner-{uuid.uuid4().hex[:8]}"
    owner = start_worker(env=worker_env(owner_name, DW_WORKER_UNHEALTHY_AFTER_FAILURES="1"))
    stubs = [waiting_run(f"sticky-fail-{index}") for index in range(3)]
    owner_id = WorkerRegistration.objects.get(status="active").worker_id
    assert set(Task.objects.filter(task_type="workflow").values_list("lease_owner", flat=True)) == {
        owner_id
    }  # the runs are warm in the owner
    start_worker(env=worker_env(f"dw-other-{uuid.uuid4().hex[:8]}"))
    wait_for(
        lambda: WorkerRegistration.objects.filter(status="active").count() == 2,
        timeout=20,
        message="the second worker did not register",
    )
    failing_task_writes(owner_name)  # from now on every task of the owner fails
    for stub in stubs:
        stub.signal("poke", "elsewhere")
    for stub in stubs:
        stub.wait(timeout=60)
        assert stub.refresh().output() == [1, "elsewhere"]
    assert WorkerRegistration.objects.get(worker_id=owner_id).failing_since is not None
    assert "no routing target" in owner.output()
    finishers = set(
        Task.objects.filter(task_type="workflow", status="completed")
        .exclude(lease_owner=owner_id)
        .values_list("lease_owner", flat=True)
    )
    assert len(finishers) == 1  # the other worker finished every run
