"""Compatibility markers for operators: doctor, admin, registrations, settings and checks."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.models import Task, WorkerRegistration, WorkflowRun
from durable_workflow.operations import schemas
from durable_workflow.operations.doctor import DoctorContext, report, run_checks
from durable_workflow.transport import worker
from tests.integration.helpers import build, register_worker, start

pytestmark = pytest.mark.django_db(transaction=True)

A, B = "build-a", "build-b"
WAITING = "waiting for a compatible worker"


def doctor() -> dict:
    ctx = DoctorContext(active_queues=lambda connection: {})
    document = report(run_checks(ctx), now=ctx.now)
    schemas.validate(document, schemas.DOCTOR)
    return document


def check(document: dict, check_id: str) -> dict:
    return next(c for c in document["checks"] if c["id"] == check_id)


def test_doctor_shows_a_run_waiting_for_a_compatible_worker_not_a_stuck_one(inline):
    with build(A):
        stub = start("tests.sequential", "compat-doctor", "ada")
    with build(B):
        clock.advance(dt.timedelta(hours=1))
        document = doctor()
    found = check(document, "worker_compatibility")
    assert found["status"] == "warning"
    assert WAITING in found["message"] and "build-a" in found["message"]
    assert "COMPATIBILITY_SUPPORTED" in found["next_step"]
    details = found["details"]
    assert (details["current"], details["supported"]) == (B, [B])
    assert details["blocked_markers"] == [A] and details["waiting_count"] == 1
    [waiting] = details["waiting"]
    assert waiting["instance_id"] == "compat-doctor" and waiting["run_id"] == stub.run_id()
    assert (waiting["task_type"], waiting["compatibility"]) == ("workflow", A)
    assert waiting["reason"] == "no_compatible_worker_for_task"
    assert check(document, "stuck_tasks")["status"] == "ok"
    assert check(document, "durable_resume_paths")["status"] == "ok"


def test_a_live_supporter_or_this_process_means_nothing_waits(inline):
    with build(A):
        start("tests.sequential", "compat-covered", "ada")
    with build(A):  # this process supports it
        assert check(doctor(), "worker_compatibility")["status"] == "ok"
    with build(B):
        clock.advance(dt.timedelta(hours=1))
        register_worker("old-worker", [A])
        document = doctor()
    found = check(document, "worker_compatibility")
    assert found["status"] == "ok"
    assert [w["supported"] for w in found["details"]["fleet"]] == [[A]]
    # A compatible worker exists and still nobody claimed the task: that one is stuck.
    assert check(document, "stuck_tasks")["status"] == "warning"


def test_a_waiting_timer_is_not_reported_overdue(inline):
    with build(A):
        stub = start("tests.sleeper", "compat-doctor-timer", 10)
        inline.run()
    with build(B):
        clock.advance(dt.timedelta(hours=1))
        document = doctor()
    assert check(document, "overdue_timers")["status"] == "ok"
    [waiting] = check(document, "worker_compatibility")["details"]["waiting"]
    assert (waiting["run_id"], waiting["task_type"]) == (stub.run_id(), "timer")


def test_doctor_command_prints_the_waiting_runs(inline):
    with build(A):
        start("tests.sequential", "compat-doctor-cli", "ada")
    out = io.StringIO()
    with build(B), pytest.raises(CommandError):  # the broker check may fail here: irrelevant
        call_command("workflow_doctor", "--strict", "--timeout", "0.5", stdout=out)
    text = out.getvalue()
    assert f"! Every ready task has a compatible worker: 1 ready task(s) {WAITING}" in text
    out = io.StringIO()
    with build(B), pytest.raises(CommandError):
        call_command("workflow_doctor", "--json", "--strict", "--timeout", "0.5", stdout=out)
    document = json.loads(out.getvalue())
    schemas.validate(document, schemas.DOCTOR)
    assert check(document, "worker_compatibility")["details"]["waiting_count"] == 1


def test_admin_run_pages_say_waiting_for_a_compatible_worker(inline, admin_client):
    with build(A):
        blocked = start("tests.sequential", "compat-admin", "ada")
    plain = start("tests.sequential", "compat-admin-plain", "ada")
    with build(B):
        for stub in (blocked, plain):
            change = reverse("admin:durable_workflow_workflowrun_change", args=[stub.run_id()])
            timeline = reverse("admin:durable_workflow_workflowrun_timeline", args=[stub.run_id()])
            pages = [admin_client.get(change), admin_client.get(timeline)]
            for page in pages:
                assert page.status_code == 200
                html = page.content.decode()
                assert (WAITING in html) is (stub is blocked)
                assert ("no_compatible_worker_for_task" in html) is (stub is blocked)
        register_worker("old-worker", [A])
        change = reverse("admin:durable_workflow_workflowrun_change", args=[blocked.run_id()])
        html = admin_client.get(change).content.decode()
    assert WAITING not in html and A in html
    workers = admin_client.get(reverse("admin:durable_workflow_workerregistration_changelist"))
    assert A in workers.content.decode()


def test_a_worker_registration_records_the_markers_it_supports():
    with build(B, B, A):
        worker.register(["celery"])
        try:
            row = WorkerRegistration.objects.get()
            assert row.compatibility == [B, A]
        finally:
            worker.deregister()
    with build(B):
        worker.register(["celery"])
        worker.deregister()
    with build(None):
        worker.register(["celery"])
        worker.deregister()
    rows = WorkerRegistration.objects.order_by("started_at", "worker_id")
    assert sorted(map(tuple, (r.compatibility for r in rows))) == [(), (B,), (B, A)]


@pytest.mark.parametrize(
    "key, value",
    [
        ("COMPATIBILITY_CURRENT", "*"),
        ("COMPATIBILITY_CURRENT", "  "),
        ("COMPATIBILITY_CURRENT", 7),
        ("COMPATIBILITY_CURRENT", "x" * 192),
        ("COMPATIBILITY_SUPPORTED", "build-a,build-b"),
        ("COMPATIBILITY_SUPPORTED", ["build-a", ""]),
        ("COMPATIBILITY_HANDBACK_SECONDS", -1),
    ],
)
def test_bad_compatibility_settings_are_refused(key, value):
    with override_settings(DURABLE_WORKFLOW={key: value}), pytest.raises(ConfigurationError):
        get_settings()


def test_a_build_that_cannot_run_its_own_runs_is_warned_about():
    with build(B, A):
        found = [m for m in checks.run_checks() if m.id == "durable_workflow.W004"]
    assert len(found) == 1 and "build-b" in found[0].msg
    for ok in ((B,), (B, B, A), (B, "*"), (None, A)):
        with build(*ok):
            assert not [m for m in checks.run_checks() if m.id == "durable_workflow.W004"]


def test_tasks_a_signal_creates_keep_the_runs_marker(inline):
    with build(A):
        stub = start("tests.approval", "compat-stays", "signal")
    with build(B, B, A):
        inline.run()
        stub.signal("approved-by", "ada")
        inline.run()
    assert WorkflowRun.objects.get(pk=stub.run_id()).compatibility == A
    stamped = set(Task.objects.filter(run_id=stub.run_id()).values_list("compatibility", flat=True))
    assert Task.objects.filter(run_id=stub.run_id()).count() >= 2 and stamped == {A}
