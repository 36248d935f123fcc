"""``workflow_doctor``: every check driven into its failure state, JSON checked by its schema."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import types

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import override_settings

from durable_workflow import clock, executor
from durable_workflow.models import Task, WorkflowRun
from durable_workflow.operations import schemas
from durable_workflow.operations.doctor import DoctorContext, report, run_checks
from durable_workflow.store import database
from durable_workflow.store import tasks as task_store
from tests import isolation
from tests.conftest import require_redis
from tests.integration.helpers import register_worker, start
from tests.testapp import workflows

pytestmark = pytest.mark.django_db(transaction=True)


def forget_warm_bodies() -> None:
    """Drop warm (sticky) workflow bodies so the next workflow task replays the new code."""
    try:
        from durable_workflow.executor import sticky
    except ImportError:  # an engine without a sticky cache replays cold anyway
        return
    sticky.cache.clear()


def no_workers(connection):
    return {}


def doctor(**overrides) -> dict:
    """Run every check (no real worker inspection unless asked) and validate the report."""
    overrides.setdefault("active_queues", no_workers)
    ctx = DoctorContext(**overrides)
    document = report(run_checks(ctx), now=ctx.now)
    schemas.validate(document, schemas.DOCTOR)
    return document


def check(document: dict, check_id: str) -> dict:
    return next(c for c in document["checks"] if c["id"] == check_id)


def run_command(*args: str) -> tuple[dict, int]:
    out = io.StringIO()
    code = 0
    try:
        call_command("workflow_doctor", "--json", *args, stdout=out)
    except CommandError as exc:
        code = exc.returncode
    document = json.loads(out.getvalue())
    schemas.validate(document, schemas.DOCTOR)
    return document, code


def run_next(stub, task_type: str) -> str:
    task = Task.objects.filter(run_id=stub.run_id(), task_type=task_type, status="ready").first()
    runner = {"workflow": executor.run_workflow_task, "activity": executor.run_activity_task}
    return runner[task_type](task.id)


def fail_a_workflow_task(instance_id: str, monkeypatch):
    """Record two steps, then change the code under the run: its next workflow task fails."""
    stub = start("tests.sequential", instance_id, "ada")
    for kind in ("workflow", "activity", "workflow", "activity"):
        assert run_next(stub, kind) == "completed"
    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)
    forget_warm_bodies()
    assert run_next(stub, "workflow") == "failed"
    return stub


@pytest.fixture
def redis():
    require_redis()


@pytest.fixture
def broker_down(monkeypatch):
    from tests.celery_app import app

    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")


def test_healthy_installation_passes_and_reports_topology(redis):
    document, code = run_command()
    assert code == 0
    assert document["status"] == "warning"  # no worker runs during the test; locmem cache
    assert {c["id"] for c in document["checks"]} >= {
        "database",
        "migrations",
        "celery_app",
        "broker",
        "workers",
        "cache_locks",
        "clock_skew",
        "stuck_tasks",
        "expired_leases",
        "overdue_timers",
        "run_deadlines",
        "durable_resume_paths",
        "unregistered_types",
        "structural_limits",
    }
    for check_id in ("database", "migrations", "broker", "clock_skew", "stuck_tasks"):
        assert check(document, check_id)["status"] == "ok", check_id
    assert document["topology"]["current_shape"] == "embedded"
    assert document["topology"]["matching_role"]["backpressure_model"] == "lease_ownership"


def test_strict_fails_on_warnings(redis):
    _, code = run_command("--strict")
    assert code == 1


def test_human_output_names_the_next_step(broker_down):
    out = io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("workflow_doctor", stdout=out)
    assert excinfo.value.returncode == 1
    text = out.getvalue()
    assert "✗ Broker reachable: broker unreachable" in text
    assert "→ Start the broker" in text
    assert "✓ Database reachable" in text
    assert "error(s)" in text


def test_broker_down(broker_down):
    document, code = run_command()
    assert code == 1
    broker = check(document, "broker")
    assert broker["status"] == "error"
    assert "127.0.0.1:1" in broker["message"]
    assert broker["details"]["brokers"]["default"]["reachable"] is False
    workers = check(document, "workers")
    assert workers["status"] == "warning"
    assert "broker is unreachable" in workers["message"]


def test_missing_migration():
    fake = types.SimpleNamespace(app_label="durable_workflow", name="0099_future")
    document = doctor(migration_plan=lambda: [(fake, False)])
    migrations = check(document, "migrations")
    assert migrations["status"] == "error"
    assert "durable_workflow.0099_future" in migrations["message"]
    assert "migrate" in migrations["next_step"]
    assert check(document, "stuck_tasks")["message"].startswith("not checked")
    other = types.SimpleNamespace(app_label="otherapp", name="0002_more")
    assert check(doctor(migration_plan=lambda: [(other, False)]), "migrations")["status"] == (
        "warning"
    )


def test_missing_migration_on_the_real_plan(monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    real = MigrationExecutor.migration_plan

    def plan_with_0001_unapplied(self, targets, clean_start=False):
        loader_node = self.loader.graph.nodes[("durable_workflow", "0001_initial")]
        return [(loader_node, False), *real(self, targets, clean_start)]

    monkeypatch.setattr(MigrationExecutor, "migration_plan", plan_with_0001_unapplied)
    document, code = run_command()
    assert code == 1
    assert "durable_workflow.0001_initial" in check(document, "migrations")["message"]


def test_stuck_ready_task(inline):
    start("tests.sequential", "doctor-stuck", "ada")
    assert check(doctor(), "stuck_tasks")["status"] == "ok"  # just created
    clock.advance(dt.timedelta(hours=1))
    stuck = check(doctor(), "stuck_tasks")
    assert stuck["status"] == "warning"
    assert stuck["details"]["count"] == 1
    assert "repair pass" in stuck["next_step"]
    assert check(doctor(stuck_after_seconds=7200), "stuck_tasks")["status"] == "ok"


def test_stuck_task_fails_strict_command(inline, redis):
    start("tests.sequential", "doctor-stuck-cli", "ada")
    clock.advance(dt.timedelta(hours=1))
    document, code = run_command("--strict", "--stuck-after", "60")
    assert code == 1
    assert check(document, "stuck_tasks")["status"] == "warning"


def test_text_output_names_the_stuck_instances(inline, redis):
    """Only ``--json`` said which runs were concerned (issue 22): the text lists the
    first ten instance ids, then a count."""
    ids = [f"doctor-stuck-{index:02}" for index in range(12)]
    for instance_id in ids:
        start("tests.sequential", instance_id, "ada")
    clock.advance(dt.timedelta(hours=1))
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("workflow_doctor", "--strict", "--stuck-after", "60", stdout=out)
    lines = out.getvalue().splitlines()
    stuck = lines.index(next(line for line in lines if "No ready task left unclaimed" in line))
    assert lines[stuck + 1] == "    instances: " + ", ".join(ids[:10]) + " and 2 more"
    assert lines[stuck + 2].startswith("    → ")


def test_overdue_timer_and_expired_lease(inline):
    stub = start("tests.sleeper", "doctor-timer", 10)
    inline.run()  # the timer is scheduled, its task waits for fire_at
    clock.advance(dt.timedelta(hours=1))
    document = doctor()
    assert check(document, "overdue_timers")["status"] == "warning"
    timer_task = Task.objects.get(run_id=stub.run_id(), task_type="timer")
    record = task_store.get(timer_task.id)
    assert task_store.claim(record, owner="gone-worker", now=clock.now(), lease_seconds=5)
    clock.advance(dt.timedelta(minutes=5))
    expired = check(doctor(), "expired_leases")
    assert expired["status"] == "warning"
    assert expired["details"]["count"] == 1


def test_failed_workflow_task_needs_repair(inline, monkeypatch):
    fail_a_workflow_task("doctor-nd", monkeypatch)
    resume = check(doctor(), "durable_resume_paths")
    assert resume["status"] == "error"
    assert resume["details"]["failed_workflow_task"] == ["doctor-nd"]
    assert "workflow_repair" in resume["next_step"]
    call_command("workflow_repair", "--instance-id", "doctor-nd", stdout=io.StringIO())
    # A later workflow task follows the failed one: the run has a way to resume again.
    assert Task.objects.filter(task_type="workflow", status="ready").count() == 1
    assert check(doctor(), "durable_resume_paths")["status"] == "ok"


def test_lost_task_is_reported(inline):
    stub = start("tests.sequential", "doctor-lost", "ada")
    Task.objects.filter(run_id=stub.run_id()).delete()
    resume = check(doctor(), "durable_resume_paths")
    assert resume["status"] == "warning"
    assert resume["details"]["missing_task"] == ["doctor-lost"]


def test_unregistered_type_and_past_deadline(inline):
    stub = start("tests.sequential", "doctor-type", "ada")
    WorkflowRun.objects.filter(id=stub.run_id()).update(
        workflow_type="renamed.away", run_deadline_at=clock.now() - dt.timedelta(hours=2)
    )
    document = doctor()
    types_check = check(document, "unregistered_types")
    assert types_check["status"] == "error"
    assert types_check["details"]["workflow_types"] == ["renamed.away"]
    assert check(document, "run_deadlines")["status"] == "warning"


def test_one_worker_node_on_sqlite_is_not_warned_about(inline):
    """The quickstart's single ``celery worker`` (a prefork pool: two registered
    processes, one node) got "workers share one SQLite database" (issue 22)."""
    register_worker("host:11", direct_queue="dw-direct-celery-host-1")
    register_worker("host:12", direct_queue="dw-direct-celery-host-1")
    seen = {"celery@host": [{"name": "celery"}]}
    one = check(doctor(active_queues=lambda connection: seen), "workers")
    assert one["status"] == "ok", one["message"]
    register_worker("other:13", direct_queue="dw-direct-celery-other-2")
    seen["celery@other"] = [{"name": "celery"}]
    two = check(doctor(active_queues=lambda connection: seen), "workers")
    if connection.vendor == "sqlite":
        assert two["status"] == "warning"
        assert two["message"] == "2 worker nodes share one SQLite database; writers will queue up"
    else:
        assert two["status"] == "ok", two["message"]


def test_no_worker_on_a_queue(inline):
    start("tests.sequential", "doctor-queue", "ada")
    Task.objects.update(queue="payments")
    seen = {"w1@host": [{"name": "celery"}]}
    workers = check(doctor(active_queues=lambda connection: seen), "workers")
    assert workers["status"] == "error", (workers["message"], workers["details"])
    assert "payments" in workers["message"]
    assert workers["details"]["workers"] == {"w1@host": ["celery"]}
    seen["w1@host"].append({"name": "payments"})
    assert check(doctor(active_queues=lambda connection: seen), "workers")["status"] == "ok"
    idle = check(doctor(), "workers")
    assert idle["status"] == "error"  # nobody at all, and work waits


def test_no_worker_on_a_queue_with_a_real_worker(redis, inline):
    from celery.contrib.testing.worker import start_worker

    from tests.celery_app import app

    config = {**settings.DURABLE_WORKFLOW, "DEFAULT_QUEUE": "dw-doctor-served"}
    with override_settings(DURABLE_WORKFLOW=config):
        start("tests.sequential", "doctor-real-queue", "ada")
        with start_worker(
            app,
            queues=["dw-doctor-served"],
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=10,
            loglevel="WARNING",
        ):
            deadline = time.monotonic() + 60
            while not app.control.inspect(timeout=1).active_queues():
                assert time.monotonic() < deadline, "the test worker never answered"
            # Long enough for a loaded machine: the worker has answered once already.
            served = check(doctor(active_queues=None, inspect_timeout=10), "workers")
            Task.objects.update(queue="dw-doctor-orphan")
            orphan = check(doctor(active_queues=None, inspect_timeout=10), "workers")
    assert served["status"] == "ok", (served["message"], served["details"])
    assert orphan["status"] == "error"
    assert orphan["details"]["no_consumer"] == ["dw-doctor-orphan"]


def test_clock_skew():
    assert check(doctor(), "clock_skew")["status"] == "ok"
    clock.advance(dt.timedelta(seconds=5))
    assert check(doctor(), "clock_skew")["status"] == "warning"
    clock.advance(dt.timedelta(minutes=5))
    skew = check(doctor(), "clock_skew")
    assert skew["status"] == "error"
    assert abs(skew["details"]["skew_seconds"]) > 300


def test_cache_without_locks_and_with_django_redis(redis):
    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    ):
        assert check(doctor(), "cache_locks")["status"] == "error"
    redis_cache = isolation.redis_cache()
    with override_settings(CACHES={"default": redis_cache}):
        assert check(doctor(), "cache_locks")["status"] == "ok"
    dead = {**redis_cache, "LOCATION": "redis://127.0.0.1:1/0"}
    with override_settings(CACHES={"default": dead}):
        assert check(doctor(), "cache_locks")["status"] == "error"


def test_configuration_warnings():
    from tests.celery_app import app

    config = {
        **settings.DURABLE_WORKFLOW,
        "PAYLOAD_CODEC": "json",
        "STRUCTURAL_LIMITS": {"payload_size_bytes": 0},
    }
    app.conf.task_always_eager = True
    try:
        with override_settings(DURABLE_WORKFLOW=config):
            document = doctor()
    finally:
        app.conf.task_always_eager = False
    assert check(document, "celery_app")["status"] == "warning"
    assert check(document, "payload_codec")["status"] == "warning"
    limits = check(document, "structural_limits")
    assert limits["status"] == "warning"
    assert limits["details"]["disabled"] == ["payload_size_bytes"]
    with override_settings(DURABLE_WORKFLOW={"NOT_A_KEY": 1}):
        broken = doctor()
    assert check(broken, "settings")["status"] == "error"
    assert check(broken, "celery_app")["message"].startswith("not checked")


def test_a_crashing_check_becomes_an_error(monkeypatch):
    from durable_workflow.operations.doctor import work

    def boom(ctx):
        raise RuntimeError("kaput")

    boom.__name__ = "check_history_budget"
    monkeypatch.setattr(
        "durable_workflow.operations.doctor.CHECKS",
        [(boom, ())],
    )
    results = run_checks(DoctorContext())
    assert results[0].status == "error"
    assert "kaput" in results[0].message
    assert work  # the real module stays importable


def test_registered_workers_count_as_consumers(inline):
    from durable_workflow.models import WorkerRegistration

    start("tests.sequential", "doctor-registered", "ada")
    Task.objects.update(queue="payments")
    assert check(doctor(), "workers")["status"] == "error"
    now = clock.now()
    WorkerRegistration.objects.create(
        worker_id="celery@box:7",
        hostname="box",
        pid=7,
        queues=["celery", "payments"],
        started_at=now,
        last_heartbeat_at=now,
    )
    workers = check(doctor(), "workers")
    assert workers["status"] == "ok", workers["message"]
    assert workers["details"]["registered_workers"] == {"celery@box:7": ["celery", "payments"]}
    clock.advance(dt.timedelta(minutes=5))  # the registration goes stale
    assert check(doctor(), "workers")["status"] == "error"


def task_table_scans() -> int:
    """Scans of the task table this transaction started (index descents included), on the
    engine's database (the second one in the routed tier)."""
    with connections[database.alias()].cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'durable_workflow_task'"
        )
        return cursor.fetchone()[0]


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3",
    reason="PostgreSQL's per-transaction table statistics",
)
def test_the_doctor_reads_the_task_table_the_same_for_3_or_30_open_runs(inline, monkeypatch):
    """Which runs stopped on a failed workflow task is asked from the failed tasks, not run
    by run: the doctor starts as many scans of the task table with 30 open runs as with 3
    (the planner on indexes, as on a large table)."""
    from django.db import transaction

    from durable_workflow.operations.queries import open_runs

    fail_a_workflow_task("doctor-failed", monkeypatch)
    scans = {}
    for size in (3, 30):
        while open_runs().count() < size:
            stub = start("tests.sequential", f"doctor-open-{open_runs().count()}", "ada")
            assert run_next(stub, "workflow") == "completed"  # waits on its activity
        with transaction.atomic(using=database.alias()):
            with connections[database.alias()].cursor() as cursor:
                cursor.execute("SET LOCAL enable_seqscan = off")
            before = task_table_scans()
            resume = check(doctor(), "durable_resume_paths")
            scans[size] = task_table_scans() - before
        assert resume["details"]["failed_workflow_task"] == ["doctor-failed"]
    assert scans[30] == scans[3], scans
