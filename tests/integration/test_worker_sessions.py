"""Worker sessions: lazy creation, admission reasons, leases, reacquisition, documents.

Every operation result, snapshot and list produced here is validated against
the shipped (normative) worker-sessions JSON schema.
"""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest

import durable_workflow as dw
from durable_workflow import clock
from durable_workflow.executor import (
    activity_task,
    dispatch,
    session_documents,
    sessions,
    settlement,
)
from durable_workflow.executor.identity import set_registered_worker_id
from durable_workflow.executor.sessions import SessionWorker
from durable_workflow.models import ActivityExecution, Task, WorkerSession
from durable_workflow.operations import schemas
from durable_workflow.store import database
from tests.integration.helpers import Recorder, events_of, register_worker, start

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = schemas.WORKER_SESSIONS


def valid(document, definition: str = "workerSessionOperationResult"):
    schemas.validate_definition(document, SCHEMA, definition)
    if "session" in document and definition == "workerSessionOperationResult":
        schemas.validate_definition(document["session"], SCHEMA, "workerSessionSnapshot")
    return document


def register(
    worker_id: str, *, queues=("celery",), capabilities=(), sessions_max=4
) -> SessionWorker:
    register_worker(
        worker_id, queues=list(queues), capabilities=capabilities, max_sessions=sessions_max
    )
    return sessions.worker_for(worker_id, now=clock.now())


def admit(options, worker, **kwargs):
    with database.atomic():
        return valid(sessions.admit(options, worker, now=clock.now(), **kwargs))


@pytest.fixture
def frozen():
    clock.freeze()
    yield
    clock.reset()


@pytest.fixture
def as_worker():
    """Make this process claim tasks as a given registered worker."""

    def use(worker_id: str | None) -> None:
        set_registered_worker_id(worker_id)

    yield use
    set_registered_worker_id(None)


# ----------------------------------------------------------- authoring + lazy creation


def test_in_session_activities_create_then_reuse_the_session(inline):
    stub = start("tests.session-steps", "sess-1", 3, {"requirements": ["gpu:l4"]}, "gpu-render")
    inline.run()
    output = stub.refresh().output()
    assert [step["label"] for step in output] == [0, 1, 2]
    assert len({step["worker"] for step in output}) == 1
    row = WorkerSession.objects.get(session_id="gpu-render")
    # The run completed, so it released its session (closed; the holder stays on record).
    assert row.status == "closed" and row.lease_owner == output[0]["worker"]
    assert row.requirements == ["gpu:l4"] and row.lease_seconds == 120
    for execution in ActivityExecution.objects.filter(run_id=stub.run_id()):
        assert execution.worker_session_id == "gpu-render"
        schemas.validate_definition(
            execution.options["worker_session"], SCHEMA, "workerSessionOptions"
        )
        assert None not in execution.options["worker_session"].values()
    assert {p["worker_session_id"] for p in events_of(stub, "ActivityScheduled")} == {"gpu-render"}


def test_session_options_are_validated_when_built():
    with pytest.raises(dw.ConfigurationError):
        dw.WorkerSessionOptions(lease_seconds=0)
    with pytest.raises(dw.ConfigurationError):
        dw.WorkerSessionOptions(requirements=["gpu", "gpu"])
    with pytest.raises(dw.ConfigurationError):
        dw.WorkerSessionOptions(queue="  ")
    with pytest.raises(dw.ConfigurationError):
        dw.WorkerSessionOptions().snapshot("")
    with pytest.raises(dw.NotInWorkflowError):
        dw.worker_session("s")


def test_the_session_queue_routes_its_activities(inline):
    stub = start("tests.session-steps", "sess-route", 1, {"queue": "gpu"}, "routed")
    inline.run()
    execution = ActivityExecution.objects.get(run_id=stub.run_id())
    assert execution.queue == "gpu"
    assert execution.options["worker_session"]["queue"] == "gpu"


# ----------------------------------------------------------- admission reasons (E1-E7)


def test_create_then_reuse_renews_the_lease(frozen):
    w = register("w1")
    first = admit({"session_id": "a"}, w)
    assert first["outcome"] == "created" and first["status"] == 201 and first["reason"] is None
    session = first["session"]
    assert session["lease_owner"] == "w1" and session["holder"]["worker_id"] == "w1"
    now = clock.now()
    assert session["lease_expires_at"] == (now + dt.timedelta(seconds=120)).isoformat()
    assert session["ttl_expires_at"] == (now + dt.timedelta(seconds=1800)).isoformat()
    clock.advance(dt.timedelta(seconds=60))
    w = register("w1")  # its registration heartbeat
    again = admit({"session_id": "a"}, w)
    assert again["outcome"] == "reused" and again["status"] == 200
    assert (
        again["session"]["lease_expires_at"]
        == (clock.now() + dt.timedelta(seconds=120)).isoformat()
    )
    assert again["session"]["ttl_expires_at"] == session["ttl_expires_at"]


def test_another_worker_is_refused_while_the_holder_is_live():
    admit({"session_id": "a"}, register("w1"))
    result = admit({"session_id": "a"}, register("w2"))
    assert result["reason"] == "session_owned_by_another_worker" and result["status"] == 409
    assert result["admitted"] is False and result["session"]["lease_owner"] == "w1"


def test_capabilities_and_queue_are_checked_before_the_session():
    weak = register("w1", capabilities=["gpu:a100"])
    result = admit({"session_id": "a", "requirements": ["gpu:l4", "gpu:a100"]}, weak)
    assert result["reason"] == "session_requirements_not_met"
    assert result["missing_requirements"] == ["gpu:l4"]
    result = admit({"session_id": "a", "queue": "gpu"}, register("w2", queues=["celery"]))
    assert result["reason"] == "session_queue_mismatch" and result["status"] == 409
    assert not WorkerSession.objects.exists()


def test_unregistered_or_stale_workers_and_bad_options_are_refused(frozen):
    assert admit({"session_id": "a"}, None)["reason"] == "worker_not_registered"
    assert admit({"session_id": "a"}, None)["status"] == 412
    register("w1")
    clock.advance(dt.timedelta(seconds=31))
    assert sessions.worker_for("w1", now=clock.now()) is None
    bad = admit({"session_id": "a", "lease_seconds": 0}, register("w2"))
    assert bad["reason"] == "invalid_worker_session" and bad["status"] == 422


def test_worker_session_limit(frozen):
    assert admit({"session_id": "a"}, register("none", sessions_max=0))["reason"] == (
        "worker_session_limit_exceeded"
    )
    one = register("one", sessions_max=1)
    assert admit({"session_id": "a"}, one)["outcome"] == "created"
    refused = admit({"session_id": "b"}, one)
    assert refused["reason"] == "worker_session_limit_exceeded"
    assert refused["max_concurrent_worker_sessions"] == 1
    assert admit({"session_id": "a"}, one)["outcome"] == "reused"  # its own session still works


def test_session_missing_when_creation_is_not_allowed():
    result = admit({"session_id": "a", "create_if_missing": False}, register("w1"))
    assert result["reason"] == "session_missing"
    assert admit({"session_id": "a", "create_if_missing": "1"}, register("w1"))["admitted"]


def test_activity_limit_holds_back_a_second_in_session_task(inline, as_worker):
    register("w1", capabilities=["gpu"])
    as_worker("w1")
    stub = start("tests.session-parallel", "sess-par", 2, {"requirements": ["gpu"]}, "limit")
    from durable_workflow.transport.in_process import run_task

    for task in Task.objects.filter(task_type="workflow", status="ready"):
        run_task(task)
    first, second = Task.objects.filter(run_id=stub.run_id(), task_type="activity").order_by(
        "created_at"
    )
    lease = activity_task._claim(first.id)
    assert lease is not None
    assert activity_task._claim(second.id) is None
    second.refresh_from_db()
    assert second.status == "ready"
    assert "session_activity_limit_exceeded" in second.last_error
    ok, value = activity_task._invoke(lease)
    settlement.settle(lease, ok, value)
    second.refresh_from_db()
    # The clock is held just short of the pause's end: a slow machine may pass 0.5 s here.
    clock.freeze(second.available_at - dt.timedelta(milliseconds=1))
    try:
        assert activity_task._claim(second.id) is None  # not due before its pause ends
        clock.freeze(second.available_at)
        assert activity_task._claim(second.id) is not None  # admitted once the first settled
    finally:
        clock.reset()


# ----------------------------------------------------------- status refresh (E8-E13)


def test_lease_expiry_then_reacquire_keeps_the_ttl(frozen):
    created = admit({"session_id": "a", "lease_seconds": 5}, register("w1"))
    clock.advance(dt.timedelta(seconds=6))
    w2 = register("w2")
    register("w1")  # still alive: only the lease lapsed
    result = admit({"session_id": "a"}, w2)
    assert result["outcome"] == "reacquired" and result["session"]["lease_owner"] == "w2"
    assert result["session"]["ttl_expires_at"] == created["session"]["ttl_expires_at"]
    assert result["session"]["failure_reason"] is None


def test_a_silent_holder_orphans_its_session(frozen):
    admit({"session_id": "a", "lease_seconds": 600}, register("w1"))
    clock.advance(dt.timedelta(seconds=31))
    assert sessions.refresh_all() == 1
    row = WorkerSession.objects.get(session_id="a")
    assert (row.status, row.failure_reason) == ("orphaned", "worker_heartbeat_stale")
    result = admit({"session_id": "a"}, register("w2"))
    assert result["outcome"] == "reacquired"


def test_ttl_expiry_is_terminal_even_with_a_fresh_lease(frozen):
    w1 = register("w1")
    admit({"session_id": "a", "ttl_seconds": 10, "lease_seconds": 600}, w1)
    clock.advance(dt.timedelta(seconds=11))
    w1 = register("w1")
    result = admit({"session_id": "a"}, w1)
    assert result["reason"] == "session_reacquire_disallowed"
    assert result["session"]["failure_reason"] == "ttl_expired"
    assert result["session"]["status"] == "expired"


def test_reacquire_can_be_forbidden_by_the_session_or_the_request(frozen):
    admit(
        {"session_id": "a", "lease_seconds": 1, "allow_reacquire_after_failure": False},
        register("w1"),
    )
    admit({"session_id": "b", "lease_seconds": 1}, register("w1"))
    clock.advance(dt.timedelta(seconds=2))
    w2 = register("w2")
    assert admit({"session_id": "a"}, w2)["reason"] == "session_reacquire_disallowed"
    refused = admit({"session_id": "b", "allow_reacquire_after_failure": False}, w2)
    assert refused["reason"] == "session_reacquire_disallowed"
    assert admit({"session_id": "b"}, w2)["outcome"] == "reacquired"


def test_explicit_verbs():
    register("w1")
    register("w2")
    created = valid(sessions.create({"session_id": "a", "worker_id": "w1", "lease_seconds": 30}))
    assert created["outcome"] == "created"
    assert valid(sessions.create({"session_id": "a"}))["reason"] == "invalid_worker_session"
    assert valid(sessions.heartbeat("zzz", "w1"))["reason"] == "session_not_found"
    assert valid(sessions.heartbeat("zzz", "w1"))["status"] == 404
    assert valid(sessions.heartbeat("a", "w2"))["reason"] == "session_owner_mismatch"
    beat = valid(sessions.heartbeat("a", "w1", lease_seconds=90))
    assert beat["outcome"] == "heartbeat_recorded" and beat["session"]["failure_reason"] is None
    assert beat["session"]["lease_expires_at"] > created["session"]["lease_expires_at"]
    mismatch = valid(sessions.close("a", "w2"))
    assert (mismatch["reason"], mismatch["status"]) == ("session_owner_mismatch", 409)
    assert valid(sessions.close("a", "w1"))["outcome"] == "closed"
    again = valid(sessions.close("a", "w1"))
    assert (again["outcome"], again["status"]) == ("already_closed", 200)
    assert valid(sessions.heartbeat("a", "w1"))["reason"] == "session_not_active"
    assert admit({"session_id": "a"}, register("w1"))["reason"] == "session_closed"


def test_a_closed_session_fails_its_activity_with_a_typed_error(inline):
    register("w1")
    valid(sessions.create({"session_id": "done", "worker_id": "w1"}))
    sessions.close("done", "w1")
    stub = start("tests.session-refused", "sess-refused", "done")
    inline.run()
    assert stub.refresh().output() == {"rejected": "session_closed", "failed": True}
    failed = events_of(stub, "ActivityFailed")[0]
    assert failed["worker_session_reason"] == "session_closed" and failed["non_retryable"]


# ----------------------------------------------------------- heartbeats and cancel (E14-E15)


def test_activity_heartbeat_renews_the_session_and_still_reports_cancel(inline, as_worker):
    from durable_workflow.executor.heartbeat import heartbeat

    register("w1")
    as_worker("w1")
    clock.freeze()
    try:
        stub = start("tests.session-steps", "sess-beat", 1, {"lease_seconds": 20}, "beat")
        from durable_workflow.transport.in_process import run_task

        run_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow"))
        task = Task.objects.get(run_id=stub.run_id(), task_type="activity")
        lease = activity_task._claim(task.id)
        before = WorkerSession.objects.get(session_id="beat").lease_expires_at
        clock.advance(dt.timedelta(seconds=15))
        register("w1")
        assert heartbeat(lease) is True
        after = WorkerSession.objects.get(session_id="beat").lease_expires_at
        assert after == clock.now() + dt.timedelta(seconds=20) and after > before
        stub.cancel()
        with pytest.raises(dw.ActivityCancelled):
            heartbeat(lease)
        assert WorkerSession.objects.get(session_id="beat").status == "active"
    finally:
        clock.reset()


# ----------------------------------------------------------- routing and shutdown


@pytest.fixture
def recorder():
    """Record the messages that would be sent instead of running anything."""
    backend = Recorder()
    previous = dispatch.set_backend(backend)
    yield backend
    dispatch.set_backend(previous)


def _schedule_the_step(instance_id: str, session_id: str) -> Any:
    from durable_workflow.transport.in_process import run_task

    stub = start("tests.session-steps", instance_id, 1, None, session_id)
    run_task(Task.objects.get(run_id=stub.run_id(), task_type="workflow"))
    return Task.objects.get(run_id=stub.run_id(), task_type="activity")


def test_in_session_tasks_are_sent_to_the_holders_direct_queue(recorder):
    register("w1")
    sessions.create({"session_id": "routed", "worker_id": "w1"})
    _schedule_the_step("sess-direct", "routed")
    assert ("activity", "dw.direct.w1", None) in recorder.sent


def test_a_refused_task_moves_on_to_the_holder(as_worker, recorder):
    register("w1")
    register("w2")
    sessions.create({"session_id": "held", "worker_id": "w1"})
    task = _schedule_the_step("sess-moves", "held")
    as_worker("w2")
    recorder.sent.clear()
    assert activity_task._claim(task.id) is None
    assert recorder.sent == [("activity", "dw.direct.w1", 0.0)]
    task.refresh_from_db()
    assert task.status == "ready" and "session_owned_by_another_worker" in task.last_error


def test_planned_shutdown_closes_held_sessions():
    from durable_workflow.transport.worker import close_sessions

    register("w1")
    sessions.create({"session_id": "x", "worker_id": "w1"})
    sessions.create({"session_id": "y", "worker_id": "w1"})
    close_sessions("w1")
    assert set(WorkerSession.objects.values_list("status", flat=True)) == {"closed"}


# ----------------------------------------------------------- visibility (E17)


def test_visibility_metrics_and_contract_validate(frozen):
    register("w1")
    register("w2")
    for name in ("a", "b", "c"):
        sessions.create({"session_id": name, "worker_id": "w1", "lease_seconds": 5})
    sessions.create({"session_id": "d", "worker_id": "w2", "lease_seconds": 500})
    sessions.close("a", "w1")
    clock.advance(dt.timedelta(seconds=6))
    register("w2")
    document = sessions.visibility()
    schemas.validate_definition(document, SCHEMA, "workerSessionVisibility")
    counts = {}
    for row in WorkerSession.objects.all():
        counts[row.status] = counts.get(row.status, 0) + 1
    assert document["metrics"] == {
        "total": 4,
        **{status: counts.get(status, 0) for status in session_documents.STATUSES},
    }
    assert document["metrics"]["expired"] == 2 and document["metrics"]["active"] == 1
    schemas.validate_definition(sessions.detail("d"), SCHEMA, "workerSessionDetail")
    assert sessions.detail("nope") is None
    schemas.validate({"worker_sessions": session_documents.runtime_contract()}, SCHEMA)
    envelope = {"metrics": session_documents.metrics(), "sessions": document["sessions"]}
    schemas.validate(envelope, SCHEMA)


# ----------------------------------------------------------- management command


def test_management_command_speaks_the_contract():
    import json

    from django.core.management import CommandError, call_command

    register("w1", capabilities=["gpu:l4"])

    def run(*args):
        out = io.StringIO()
        call_command("workflow_worker_session", *args, stdout=out)
        return json.loads(out.getvalue())

    created = run(
        "create", "cli", "--worker-id", "w1", "--requirement", "gpu:l4", "--lease-seconds", "30"
    )
    valid(created)
    assert created["outcome"] == "created" and created["session"]["requirements"] == ["gpu:l4"]
    assert valid(run("heartbeat", "cli", "--worker-id", "w1"))["outcome"] == "heartbeat_recorded"
    listing = run("list")
    schemas.validate_definition(listing, SCHEMA, "workerSessionVisibility")
    assert listing["metrics"]["active"] == 1
    schemas.validate_definition(run("show", "cli"), SCHEMA, "workerSessionDetail")
    schemas.validate(run("contract"), SCHEMA)
    with pytest.raises(CommandError, match="session_owner_mismatch"):
        call_command(
            "workflow_worker_session", "close", "cli", "--worker-id", "w2", stdout=io.StringIO()
        )
    assert valid(run("close", "cli", "--worker-id", "w1"))["outcome"] == "closed"
    with pytest.raises(CommandError, match="no worker session"):
        call_command("workflow_worker_session", "show", "nope", stdout=io.StringIO())


# ----------------------------------------------------------- release when the run closes


def _status(session_id: str) -> str:
    return WorkerSession.objects.get(session_id=session_id).status


def test_a_completed_run_releases_its_session(inline):
    stub = start("tests.session-rounds", "rel-done", "rel-done")
    inline.run()
    assert stub.refresh().status() == "completed"
    row = WorkerSession.objects.get(session_id="rel-done")
    assert (row.status, row.failure_reason) == ("closed", None)
    assert row.closed_at is not None and row.lease_owner  # the holder stays on record


@pytest.mark.parametrize("ending", ["cancel", "terminate"])
def test_a_cancelled_or_terminated_run_releases_its_session(inline, ending):
    stub = start("tests.session-rounds", f"rel-{ending}", f"rel-{ending}", 2)
    inline.run()
    assert _status(f"rel-{ending}") == "active"  # between rounds
    getattr(stub, ending)()
    inline.run()
    assert stub.refresh().status() in ("cancelled", "terminated")
    assert _status(f"rel-{ending}") == "closed"


def test_continue_as_new_keeps_the_session_for_the_next_run(inline):
    stub = start("tests.session-rounds", "rel-can", "rel-can", 3, True)
    inline.run()
    first_run = stub.run_id()
    stub.signal("next")
    inline.run()
    assert stub.refresh().run_id() != first_run and stub.status() == "waiting"
    assert _status("rel-can") == "active"  # the next run's step was admitted to it
    stub.signal("next")  # the third run takes the last round and ends the chain
    inline.run()
    assert stub.refresh().status() == "completed"
    assert _status("rel-can") == "closed"


def test_a_session_another_open_run_used_is_kept(inline):
    first = start("tests.session-rounds", "rel-shared-1", "shared")
    second = start("tests.session-rounds", "rel-shared-2", "shared", 2)
    inline.run()
    assert first.refresh().status() == "completed" and second.refresh().status() == "waiting"
    assert _status("shared") == "active"
    second.signal("next")
    inline.run()
    assert second.refresh().status() == "completed"
    assert _status("shared") == "closed"


# ----------------------------------------------------------- refusals back off


def test_refused_task_pauses_double_up_to_the_cap(as_worker, recorder, settings):
    from durable_workflow.operations.metrics import operator_metrics

    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "WORKER_SESSION_REFUSAL_BACKOFF_SECONDS": 0.5,
        "WORKER_SESSION_REFUSAL_MAX_BACKOFF_SECONDS": 3,
    }
    register("full", sessions_max=1)
    sessions.create({"session_id": "taken", "worker_id": "full"})
    task = _schedule_the_step("sess-backoff", "wants-room")
    as_worker("full")
    clock.freeze()
    try:
        pauses = []
        for _ in range(5):
            recorder.sent.clear()
            assert activity_task._claim(task.id) is None
            ((_type, _queue, pause),) = recorder.sent
            pauses.append(pause)
            row = Task.objects.get(id=task.id)
            assert row.status == "ready"
            assert row.available_at == clock.now() + dt.timedelta(seconds=pause)
            assert "worker_session_limit_exceeded" in row.last_error
            clock.advance(dt.timedelta(seconds=pause))
            register("full", sessions_max=1)
        assert pauses == [0.5, 1.0, 2.0, 3.0, 3.0]
        assert Task.objects.get(id=task.id).dispatch_count == 6  # the first message, 5 more
        block = operator_metrics()["worker_sessions"]
        assert (block["refused_waiting_tasks"], block["refused_waiting_messages"]) == (1, 6)
    finally:
        clock.reset()


def test_a_planned_shutdown_hands_back_a_session_an_open_run_still_uses(inline, as_worker):
    """Stopping a worker (a deploy, or an interrupt in an activity) must not fail the
    workflows in its sessions: their next steps reacquire the session elsewhere."""
    from durable_workflow.transport.worker import close_sessions

    register("w1")
    as_worker("w1")
    stub = start("tests.session-rounds", "rel-shutdown", "rel-shutdown", 2)
    idle = start("tests.session-rounds", "rel-idle", "rel-idle")
    inline.run()
    sessions.create({"session_id": "warm-up", "worker_id": "w1"})
    close_sessions("w1")
    row = WorkerSession.objects.get(session_id="rel-shutdown")
    assert (row.status, row.failure_reason) == ("expired", "lease_expired")
    assert _status("warm-up") == "closed"  # no workflow uses it: closed, as the spec says
    assert _status("rel-idle") == "closed"  # released when its run completed
    register("w2")
    as_worker("w2")
    stub.signal("next")
    inline.run()
    assert stub.refresh().status() == "completed", stub.describe()
    assert [step["label"] for step in stub.output()] == [2, 1]
    assert idle.refresh().status() == "completed"
    row = WorkerSession.objects.get(session_id="rel-shutdown")
    assert row.status == "closed" and row.lease_owner == "w2"
