"""Webhook routes through Django's test client: every route and every row of the matrices."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.db import connection

from durable_workflow import WorkflowStub
from durable_workflow.models import (
    WorkflowCommand,
    WorkflowInstance,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)

pytestmark = pytest.mark.django_db(transaction=True)

ORDER = "/webhooks/start/order-workflow"
MODELS = (WorkflowInstance, WorkflowRun, WorkflowCommand, WorkflowSignal, WorkflowUpdate)
UNKNOWN_UUID = "01a22724-dcfc-7872-bc9f-b4556a9afc5e"


def post(client: Any, url: str, body: Any = None, **headers: str) -> Any:
    data = "" if body is None else json.dumps(body)
    return client.post(
        url,
        data=data,
        content_type="application/json",
        headers={"Content-Type": "application/json", **headers},
    )


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def start_order(client: Any, instance_id: str, inline: Any = None, **body: Any) -> dict[str, Any]:
    response = post(client, ORDER, {"workflow_id": instance_id, "order_id": 7, **body})
    assert response.status_code == 202, response.json()
    if inline is not None:
        inline.run()
    return response.json()


@pytest.fixture(autouse=True)
def _open_webhooks(settings, inline):
    """No credentials needed here (auth has its own tests); tasks never reach a broker."""
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}


@pytest.fixture
def worker_thread(inline):
    """Drain tasks in a background thread, as a worker would, while a request waits."""
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                inline.run()
                time.sleep(0.02)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


@pytest.fixture
def looped(client, inline):
    """An instance with a historical run 1 (continued as new) and a current run 2."""
    response = post(client, "/webhooks/start/webhooks.looper", {"workflow_id": "loop-1"})
    assert response.status_code == 202
    inline.run()
    runs = list(WorkflowRun.objects.filter(instance_id="loop-1").order_by("run_number"))
    assert len(runs) == 2
    return {"old": str(runs[0].id), "current": str(runs[1].id)}


# ------------------------------------------------------------------ start
def test_start_returns_202_started_new_and_records_a_webhook_command(client, inline):
    response = post(
        client,
        ORDER,
        {"workflow_id": "order-123", "order_id": 123, "priority": "high"},
        **{"X-Request-Id": "req-1"},
    )
    assert response.status_code == 202
    body = response.json()
    assert body["outcome"] == "started_new"
    assert body["workflow_id"] == "order-123"
    assert body["workflow_type"] == "webhooks.order"
    assert body["command_status"] == "accepted"
    assert body["command_source"] == "webhook"
    assert body["rejection_reason"] is None
    assert body["resolved_run_id"] == body["run_id"]
    assert body["requested_run_id"] is None
    assert body["command_sequence"] == 1
    command = WorkflowCommand.objects.get(id=body["command_id"])
    assert command.source == "webhook"
    ingress = command.metadata["ingress"]
    assert ingress["request_id"] == "req-1"
    assert ingress["route_name"] == "durable_workflow_webhooks:start"
    assert ingress["path"] == ORDER
    assert ingress["auth_method"] == "none"
    assert len(ingress["fingerprint"]) == 64
    inline.run()
    stub = WorkflowStub.load("order-123")
    assert stub.status() == "waiting"
    assert stub.query("current-stage") == "waiting"


def test_start_generates_an_instance_id_and_fills_trailing_defaults(client, inline):
    response = post(client, ORDER, {"order_id": 1})
    assert response.status_code == 202
    instance_id = response.json()["workflow_id"]
    assert WorkflowInstance.objects.filter(instance_id=instance_id).exists()
    stub = WorkflowStub.load(instance_id)
    stub.signal("approved-by", "Ada")
    inline.run()
    stub.submit_update("mark-ready", True)
    inline.run()
    assert stub.refresh().output() == {"order_id": 1, "priority": "normal", "approver": "Ada"}


def test_duplicate_start_matrix(client, inline):
    first = start_order(client, "dup-1", inline)
    rejected = post(client, ORDER, {"workflow_id": "dup-1", "order_id": 7})
    assert rejected.status_code == 409
    body = rejected.json()
    assert body["outcome"] == "rejected_duplicate"
    assert body["command_status"] == "rejected"
    assert body["rejection_reason"] == "instance_already_started"
    assert body["run_id"] == body["resolved_run_id"] == first["run_id"]
    assert body["requested_run_id"] is None
    assert WorkflowCommand.objects.get(id=body["command_id"]).status == "rejected"
    reused = post(
        client,
        ORDER,
        {"workflow_id": "dup-1", "order_id": 7, "on_duplicate": "return_existing_active"},
    )
    assert reused.status_code == 200
    assert reused.json()["outcome"] == "returned_existing_active"
    assert reused.json()["run_id"] == first["run_id"]


def test_start_visibility_goes_to_the_run_not_to_handle(client):
    body = {
        "workflow_id": "vis-1",
        "order_id": 3,
        "visibility": {
            "business_key": "order-3",
            "labels": {"tenant": "acme"},
            "memo": {"customer": {"id": 42}, "source": "checkout"},
        },
    }
    assert post(client, ORDER, body).status_code == 202
    run = WorkflowRun.objects.get(instance_id="vis-1")
    assert run.business_key == "order-3"
    assert run.labels == {"tenant": "acme"}
    assert run.memo == {"customer": {"id": 42}, "source": "checkout"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workflow_id": "v-1"}, "order_id"),  # missing required handle() key
        ({"workflow_id": "v-1", "order_id": 1, "colour": "red"}, "colour"),  # undeclared key
        ({"workflow_id": "", "order_id": 1}, "workflow_id"),
        ({"workflow_id": "x" * 192, "order_id": 1}, "workflow_id"),
        ({"workflow_id": "bad id/!", "order_id": 1}, "workflow_id"),
        ({"workflow_id": 12, "order_id": 1}, "workflow_id"),
        ({"workflow_id": "v-1", "order_id": 1, "on_duplicate": "overwrite"}, "on_duplicate"),
        ({"workflow_id": "v-1", "order_id": 1, "visibility": []}, "visibility"),
        ({"workflow_id": "v-1", "order_id": 1, "visibility": {"memo": [1]}}, "visibility.memo"),
        ({"workflow_id": "v-1", "order_id": 2**70}, "arguments"),
    ],
)
def test_start_validation_failures_are_422_and_write_nothing(client, body, field):
    before = row_counts()
    response = post(client, ORDER, body)
    assert response.status_code == 422
    assert field in response.json()["validation_errors"]
    assert response.json()["message"]
    assert row_counts() == before


def test_instance_id_is_checked_before_duplicate_handling(client, inline):
    start_order(client, "taken", inline)
    before = row_counts()
    response = post(client, ORDER, {"workflow_id": "taken ", "order_id": 1})
    assert response.status_code == 422
    assert response.json()["reason"] == "invalid_workflow_id"
    assert row_counts() == before


def test_workflow_without_handle_is_422(client):
    response = post(client, "/webhooks/start/webhooks.no-handle", {"workflow_id": "nh-1"})
    assert response.status_code == 422
    assert "handle" in response.json()["validation_errors"]
    assert not WorkflowInstance.objects.filter(instance_id="nh-1").exists()


def test_unknown_or_unexposed_alias_is_404(client):
    assert post(client, "/webhooks/start/nope", {}).status_code == 404
    assert post(client, "/webhooks/start/webhooks.hidden", {}).status_code == 404
    assert post(client, "/webhooks/start/tests.approval", {}).status_code == 404
    # The order workflow is exposed only under its alias, not its type key.
    assert post(client, "/webhooks/start/webhooks.order", {"order_id": 1}).status_code == 404


def test_start_on_an_id_of_another_workflow_type_is_refused_and_writes_nothing(client):
    WorkflowStub.make("webhooks.hidden", "other-type")
    before = row_counts()
    response = post(client, ORDER, {"workflow_id": "other-type", "order_id": 1})
    assert response.status_code == 409
    assert response.json()["rejection_reason"] == "instance_already_started"
    assert response.json()["command_id"] is None
    assert row_counts() == before


START_ROUTES = [
    (ORDER, lambda i: {"workflow_id": i, "order_id": 1}),
    (
        "/webhooks/start/order-workflow/signals/approved-by",
        lambda i: {"workflow_id": i, "order_id": 1},
    ),
    (
        "/webhooks/control-plane/start",
        lambda i: {"workflow_type": "webhooks.order", "instance_id": i, "arguments": [1]},
    ),
]


@pytest.mark.parametrize(("url", "body"), START_ROUTES)
def test_a_start_tells_nothing_about_an_instance_of_an_unexposed_type(client, url, body):
    """Issue 18, item 7: the existence oracle.

    A start cannot answer an id that is taken the way it answers a free one (that
    one starts a run), so the refusal is the same whatever holds the id: an
    instance of a type these routes expose or of one they do not, running or
    not. It names nothing about that instance, and nothing is written.
    """
    WorkflowStub.make("webhooks.hidden", "taken-hidden").start()
    WorkflowStub.make("webhooks.looper", "taken-visible").start()
    before = row_counts()
    hidden = post(client, url, body("taken-hidden"))
    visible = post(client, url, body("taken-visible"))
    assert hidden.status_code == visible.status_code == 409
    assert hidden.json() == json.loads(visible.content.replace(b"taken-visible", b"taken-hidden"))
    assert set(hidden.headers.items()) == set(visible.headers.items())
    assert row_counts() == before
    assert "webhooks.hidden" not in hidden.content.decode()


def test_malformed_json_gets_the_error_envelope(client):
    for raw in (b"{", b"[1, 2]", b'"text"', b"\xff\xfe", b'{"a": NaN}'):
        response = client.post(ORDER, data=raw, content_type="application/json")
        assert response.status_code == 422, raw
        body = response.json()
        assert set(body) == {"message", "reason", "validation_errors"}
        assert body["reason"] == "malformed_json"


def test_body_size_and_depth_limits(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True, "MAX_BODY_BYTES": 100}
    response = post(client, ORDER, {"order_id": 1, "workflow_id": "big", "pad": "x" * 200})
    assert response.status_code == 422
    assert response.json()["reason"] == "body_too_large"
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True, "MAX_JSON_DEPTH": 4}
    deep = {"order_id": {"a": {"b": {"c": {"d": 1}}}}, "workflow_id": "deep"}
    assert post(client, ORDER, deep).status_code == 422
    assert not WorkflowInstance.objects.filter(instance_id__in=["big", "deep"]).exists()


# ----------------------------------------------------------------- signals
def test_signal_matrix(client, inline):
    start_order(client, "sig-1", inline)
    url = "/webhooks/instances/sig-1/signals/approved-by"
    accepted = post(client, url, {"arguments": ["Taylor"]})
    assert accepted.status_code == 202
    body = accepted.json()
    assert body["outcome"] == "signal_received"
    assert body["target_scope"] == "instance"
    assert body["command_sequence"] == 2
    assert body["resolved_run_id"] == body["run_id"]
    assert WorkflowSignal.objects.get(command_id=body["command_id"]).status == "received"
    inline.run()
    assert WorkflowStub.load("sig-1").query("current-stage") == "approved"

    unknown = post(client, "/webhooks/instances/sig-1/signals/nope", {"arguments": []})
    assert unknown.status_code == 404
    assert unknown.json()["outcome"] == "rejected_unknown_signal"
    assert unknown.json()["rejection_reason"] == "unknown_signal"
    assert WorkflowSignal.objects.get(command_id=unknown.json()["command_id"]).status == "rejected"

    invalid = post(client, "/webhooks/instances/sig-1/signals/typed", {"arguments": [5]})
    assert invalid.status_code == 422
    assert invalid.json()["outcome"] == "rejected_invalid_arguments"
    assert "who" in invalid.json()["validation_errors"]

    before = row_counts()
    not_array = post(client, url, {"arguments": {"who": "x"}})
    assert not_array.status_code == 422
    assert "arguments" in not_array.json()["validation_errors"]
    assert row_counts() == before


def test_signal_without_arguments_resumes_with_true(client, inline):
    start_order(client, "sig-true", inline)
    assert post(client, "/webhooks/instances/sig-true/signals/approved-by").status_code == 202
    inline.run()
    assert WorkflowStub.load("sig-true").query("events-starting-with", "approved:True") == 1


def test_signal_rejections_not_started_not_active_unknown_instance(client, inline):
    WorkflowStub.make("webhooks.order", "reserved-1")
    response = post(client, "/webhooks/instances/reserved-1/signals/approved-by")
    assert response.status_code == 409
    assert response.json()["outcome"] == "rejected_not_started"
    assert response.json()["rejection_reason"] == "instance_not_started"
    assert response.json()["run_id"] is None

    start_order(client, "closed-1", inline)
    WorkflowStub.load("closed-1").terminate("done")
    response = post(client, "/webhooks/instances/closed-1/signals/approved-by")
    assert response.status_code == 409
    assert response.json()["outcome"] == "rejected_not_active"
    assert response.json()["rejection_reason"] == "run_not_active"

    before = row_counts()
    response = post(client, "/webhooks/instances/missing/signals/approved-by")
    assert response.status_code == 404
    assert response.json()["reason"] == "instance_not_found"
    assert row_counts() == before


def test_run_targeted_signal(client, looped, inline):
    url = f"/webhooks/instances/loop-1/runs/{looped['current']}/signals/go"
    accepted = post(client, url)
    assert accepted.status_code == 202
    assert accepted.json()["target_scope"] == "run"
    assert accepted.json()["requested_run_id"] == looped["current"]

    historical = post(client, f"/webhooks/instances/loop-1/runs/{looped['old']}/signals/go")
    assert historical.status_code == 409
    body = historical.json()
    assert body["outcome"] == "rejected_not_current"
    assert body["rejection_reason"] == "selected_run_not_current"
    assert body["target_scope"] == "run"
    assert body["run_id"] == body["requested_run_id"] == looped["old"]
    assert body["resolved_run_id"] == looped["current"]
    command = WorkflowCommand.objects.get(id=body["command_id"])
    assert command.status == "rejected"
    assert command.metadata["requested_run_id"] == looped["old"]

    for run_id in ("not-a-uuid", "01a22724-dcfc-7872-bc9f-b4556a9afc5e"):
        response = post(client, f"/webhooks/instances/loop-1/runs/{run_id}/signals/go")
        assert response.status_code == 404
        assert response.json()["reason"] == "run_not_found"


# ------------------------------------------------------- signal-with-start
def test_signal_with_start_starts_then_reuses(client, inline):
    url = "/webhooks/start/order-workflow/signals/approved-by"
    first = post(client, url, {"workflow_id": "sws-1", "order_id": 1, "signal_arguments": ["Ada"]})
    assert first.status_code == 202
    body = first.json()
    assert body["outcome"] == "signal_received"
    assert body["start_outcome"] == "started_new"
    assert body["start_command_status"] == "accepted"
    assert body["start_command_sequence"] == 1
    assert body["command_sequence"] == 2
    assert body["intake_group_id"]
    start_row = WorkflowCommand.objects.get(id=body["start_command_id"])
    assert start_row.payload["intake_group_id"] == body["intake_group_id"]
    assert start_row.metadata["ingress"]["route_name"].endswith("signal-with-start")

    again = post(client, url, {"workflow_id": "sws-1", "order_id": 1, "signal_arguments": ["B"]})
    assert again.status_code == 202
    assert again.json()["start_outcome"] == "returned_existing_active"
    assert again.json()["run_id"] == body["run_id"]
    inline.run()
    assert WorkflowStub.load("sws-1").query("events-starting-with", "approved:Ada") == 1


def test_signal_with_start_rejections(client):
    base = {"workflow_id": "sws-2", "order_id": 1}
    unknown = post(client, "/webhooks/start/order-workflow/signals/nope", base)
    assert unknown.status_code == 404
    body = unknown.json()
    assert body["outcome"] == "rejected_unknown_signal"
    assert body["run_id"] is body["start_command_id"] is body["start_outcome"] is None
    assert not WorkflowRun.objects.filter(instance_id="sws-2").exists()

    invalid = post(
        client, "/webhooks/start/order-workflow/signals/typed", {**base, "signal_arguments": [1]}
    )
    assert invalid.status_code == 422
    assert invalid.json()["outcome"] == "rejected_invalid_arguments"
    assert not WorkflowRun.objects.filter(instance_id="sws-2").exists()

    before = row_counts()
    url = "/webhooks/start/order-workflow/signals/approved-by"
    assert post(client, url, {**base, "signal_arguments": "Ada"}).status_code == 422
    assert post(client, url, {**base, "on_duplicate": "reject_duplicate"}).status_code == 422
    assert post(client, "/webhooks/start/nope/signals/approved-by", base).status_code == 404
    assert row_counts() == before


# ----------------------------------------------------------------- queries
def test_query_routes(client, inline, looped):
    start_order(client, "q-1", inline)
    url = "/webhooks/instances/q-1/queries/"
    commands = WorkflowCommand.objects.count()
    named = post(client, url + "events-starting-with", {"arguments": {"prefix": "start"}})
    assert named.status_code == 200
    assert named.json() == {
        "query_name": "events-starting-with",
        "workflow_id": "q-1",
        "run_id": WorkflowStub.load("q-1").run_id(),
        "target_scope": "instance",
        "result": 1,
    }
    positional = post(client, url + "events_starting_with", {"arguments": ["nothing"]})
    assert positional.status_code == 200
    assert positional.json()["query_name"] == "events-starting-with"  # normalised
    assert positional.json()["result"] == 0
    assert WorkflowCommand.objects.count() == commands  # queries write no command row

    invalid = post(client, url + "events-starting-with", {"arguments": {}})
    assert invalid.status_code == 422
    assert invalid.json()["message"] == (
        "Workflow query [events-starting-with] received invalid arguments."
    )
    assert invalid.json()["validation_errors"]
    assert post(client, url + "nope").status_code == 409
    assert post(client, url + "explode").status_code == 422
    assert post(client, url + "current-stage", {"arguments": "x"}).status_code == 422

    historical = post(
        client, f"/webhooks/instances/loop-1/runs/{looped['old']}/queries/current-stage"
    )
    assert historical.status_code == 409  # the looper declares no such query
    assert post(client, "/webhooks/instances/missing/queries/current-stage").status_code == 404
    missing_run = f"/webhooks/instances/q-1/runs/{looped['old']}/queries/current-stage"
    assert post(client, missing_run).status_code == 404  # run of another instance

    WorkflowStub.make("webhooks.order", "q-reserved")
    not_started = post(client, "/webhooks/instances/q-reserved/queries/current-stage")
    assert not_started.status_code == 409


def test_query_a_closed_historical_run_by_run_id(client, inline):
    start_order(client, "q-closed", inline)
    stub = WorkflowStub.load("q-closed")
    stub.terminate()
    url = f"/webhooks/instances/q-closed/runs/{stub.run_id()}/queries/current-stage"
    response = post(client, url)
    assert response.status_code == 200
    assert response.json()["target_scope"] == "run"
    assert response.json()["result"] == "waiting"


# ----------------------------------------------------------------- updates
def test_update_wait_for_accepted_then_lookup(client, inline):
    start_order(client, "u-1", inline)
    post(client, "/webhooks/instances/u-1/signals/approved-by", {"arguments": ["Ada"]})
    inline.run()
    response = post(
        client,
        "/webhooks/instances/u-1/updates/mark-ready",
        {"arguments": {"approved": True}, "wait_for": "accepted"},
    )
    assert response.status_code == 202
    body = response.json()
    assert body["outcome"] is None
    assert body["update_status"] == "accepted"
    assert body["wait_for"] == "accepted"
    assert body["wait_timed_out"] is False
    assert body["wait_timeout_seconds"] is None
    assert body["validation_errors"] == []
    for key in ("workflow_sequence", "result", "applied_at", "rejected_at", "closed_at"):
        assert body[key] is None
    assert body["accepted_at"].endswith("Z")
    lookup = f"/webhooks/instances/u-1/updates/{body['update_id']}"
    still_open = client.get(lookup)
    assert still_open.status_code == 202
    assert still_open.json()["wait_for"] == "status"
    inline.run()
    closed = client.get(lookup)
    assert closed.status_code == 200
    assert closed.json()["outcome"] == "update_completed"
    assert closed.json()["result"] == {"approved": True}
    assert closed.json()["workflow_sequence"] is not None
    assert closed.json()["applied_at"] and closed.json()["closed_at"]
    run_id = body["run_id"]
    assert (
        client.get(f"/webhooks/instances/u-1/runs/{run_id}/updates/{body['update_id']}").json()[
            "update_status"
        ]
        == "completed"
    )
    assert client.get("/webhooks/instances/u-1/updates/not-a-uuid").status_code == 404
    assert client.get(f"/webhooks/instances/u-2/updates/{body['update_id']}").status_code == 404


def test_update_waits_for_completion_with_a_worker(client, inline, worker_thread):
    post(client, ORDER, {"workflow_id": "u-wait", "order_id": 1})
    post(client, "/webhooks/instances/u-wait/signals/approved-by", {"arguments": ["Ada"]})
    deadline = time.monotonic() + 10
    while WorkflowSignal.objects.filter(instance_id="u-wait", status="received").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    response = post(
        client,
        "/webhooks/instances/u-wait/updates/mark-ready",
        {"arguments": [True, "webhook"], "wait_timeout_seconds": 10},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "update_completed"
    assert body["update_status"] == "completed"
    assert body["wait_for"] == "completed"
    assert body["wait_timeout_seconds"] == 10
    assert body["result"] == {"approved": True}
    failed = post(client, "/webhooks/instances/u-wait/updates/fail", {"wait_timeout_seconds": 10})
    # The run may already have completed after mark-ready: then the update is refused.
    assert failed.status_code in (409, 422)
    if failed.status_code == 422:
        assert failed.json()["outcome"] == "update_failed"
        assert failed.json()["failure_id"]


def test_update_failure_is_422(client, inline, worker_thread):
    post(client, ORDER, {"workflow_id": "u-fail", "order_id": 1})
    deadline = time.monotonic() + 10
    while WorkflowStub.load("u-fail").status() != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    response = post(client, "/webhooks/instances/u-fail/updates/fail", {"wait_timeout_seconds": 10})
    assert response.status_code == 422
    body = response.json()
    assert body["outcome"] == "update_failed"
    assert body["update_status"] == "failed"
    assert body["failure_message"] == "the update body failed"
    assert body["failure_id"]
    lookup = client.get(f"/webhooks/instances/u-fail/updates/{body['update_id']}")
    assert lookup.status_code == 200
    assert lookup.json()["update_status"] == "failed"


def test_update_wait_times_out_with_202(client, inline):
    start_order(client, "u-slow", inline)
    response = post(
        client,
        "/webhooks/instances/u-slow/updates/mark-ready",
        {"arguments": {"approved": True}, "wait_timeout_seconds": 0.2},
    )
    assert response.status_code == 202
    body = response.json()
    assert body["update_status"] == "accepted"
    assert body["wait_for"] == "completed"
    assert body["wait_timed_out"] is True
    assert body["wait_timeout_seconds"] == 0.2


def test_update_rejections(client, inline, looped):
    start_order(client, "u-rej", inline)
    url = "/webhooks/instances/u-rej/updates/"
    unknown = post(client, url + "nope", {"wait_for": "accepted"})
    assert unknown.status_code == 404
    assert unknown.json()["outcome"] == "rejected_unknown_update"
    invalid = post(client, url + "mark-ready", {"arguments": {"approved": "yes"}})
    assert invalid.status_code == 422
    assert invalid.json()["outcome"] == "rejected_invalid_arguments"
    assert invalid.json()["update_status"] == "rejected"
    assert invalid.json()["validation_errors"]
    missing = post(client, url + "mark-ready", {"arguments": {}})
    assert missing.status_code == 422
    rejected_lookup = client.get(f"/webhooks/instances/u-rej/updates/{missing.json()['update_id']}")
    assert rejected_lookup.status_code == 200  # a closed lifecycle, whatever closed it
    assert rejected_lookup.json()["update_status"] == "rejected"
    assert rejected_lookup.json()["outcome"] == "rejected_invalid_arguments"
    assert WorkflowUpdate.objects.filter(instance_id="u-rej", status="rejected").count() == 3

    post(client, "/webhooks/instances/u-rej/signals/approved-by", {"arguments": ["Ada"]})
    pending = post(client, url + "mark-ready", {"arguments": [True]})
    assert pending.status_code == 409
    assert pending.json()["outcome"] == "rejected_pending_signal"

    before = row_counts()
    for body in (
        {"arguments": "yes"},
        {"wait_for": "forever"},
        {"wait_timeout_seconds": 10_000},
        {"wait_timeout_seconds": True},
        {"surprise": 1},
    ):
        assert post(client, url + "mark-ready", body).status_code == 422, body
    assert row_counts() == before

    WorkflowStub.make("webhooks.order", "u-reserved")
    not_started = post(client, "/webhooks/instances/u-reserved/updates/mark-ready")
    assert not_started.status_code == 409
    assert not_started.json()["outcome"] == "rejected_not_started"

    historical = post(client, f"/webhooks/instances/loop-1/runs/{looped['old']}/updates/x")
    assert historical.status_code == 409
    assert historical.json()["outcome"] == "rejected_not_current"
    assert historical.json()["resolved_run_id"] == looped["current"]

    WorkflowStub.load("u-rej").terminate()
    closed = post(client, url + "mark-ready", {"arguments": [True]})
    assert closed.status_code == 409
    assert closed.json()["outcome"] == "rejected_not_active"
    assert post(client, "/webhooks/instances/missing/updates/x").status_code == 404


# ---------------------------------------------------- cancel / terminate / repair
@pytest.mark.parametrize(
    ("kind", "outcome"), [("cancel", "cancelled"), ("terminate", "terminated")]
)
def test_cancel_and_terminate(client, inline, kind, outcome):
    start_order(client, f"{kind}-1", inline)
    response = post(client, f"/webhooks/instances/{kind}-1/{kind}", {"reason": "customer asked"})
    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == outcome
    assert body["reason"] == "customer asked"
    assert WorkflowCommand.objects.get(id=body["command_id"]).reason == "customer asked"
    inline.run()
    assert WorkflowStub.load(f"{kind}-1").status() == outcome
    again = post(client, f"/webhooks/instances/{kind}-1/{kind}")
    assert again.status_code == 409
    assert again.json()["outcome"] == "rejected_not_active"
    WorkflowStub.make("webhooks.order", f"{kind}-reserved")
    assert post(client, f"/webhooks/instances/{kind}-reserved/{kind}").status_code == 409
    assert post(client, f"/webhooks/instances/missing/{kind}").status_code == 404
    assert post(client, f"/webhooks/instances/{kind}-1/{kind}", {"reason": 5}).status_code == 422


@pytest.mark.parametrize("kind", ["cancel", "terminate", "repair"])
def test_run_targeted_commands_on_a_historical_run(client, looped, kind):
    response = post(client, f"/webhooks/instances/loop-1/runs/{looped['old']}/{kind}")
    assert response.status_code == 409
    body = response.json()
    assert body["outcome"] == "rejected_not_current"
    assert body["rejection_reason"] == "selected_run_not_current"
    assert body["target_scope"] == "run"
    assert body["run_id"] == body["requested_run_id"] == looped["old"]
    assert body["resolved_run_id"] == looped["current"]
    assert WorkflowCommand.objects.get(id=body["command_id"]).status == "rejected"
    current = post(client, f"/webhooks/instances/loop-1/runs/{looped['current']}/{kind}")
    assert current.status_code == 200


def test_repair(client, inline):
    start_order(client, "rep-1")  # its first workflow task is still ready
    dispatched = post(client, "/webhooks/instances/rep-1/repair")
    assert dispatched.status_code == 200
    assert dispatched.json()["outcome"] == "repair_dispatched"
    inline.run()
    healthy = post(client, "/webhooks/instances/rep-1/repair")
    assert healthy.status_code == 200
    assert healthy.json()["outcome"] in ("repair_dispatched", "repair_not_needed")
    WorkflowStub.make("webhooks.order", "rep-reserved")
    assert post(client, "/webhooks/instances/rep-reserved/repair").status_code == 409
    assert post(client, "/webhooks/instances/missing/repair").status_code == 404


# ---------------------------------------------------------------- describe
def test_describe_active_terminated_historical_and_missing(client, inline, looped):
    start_order(client, "d-1", inline, visibility={"business_key": "bk-1"})
    active = client.get("/webhooks/instances/d-1/describe")
    assert active.status_code == 200
    body = active.json()
    assert body["found"] is True
    assert body["workflow_type"] == "webhooks.order"
    assert body["workflow_class"].endswith("WebhookOrder")
    assert body["business_key"] == "bk-1"
    assert body["run_count"] == 1
    assert body["reason"] is None
    run = body["run"]
    assert run["is_current_run"] is True
    assert run["status"] == "waiting"
    assert run["status_bucket"] == "running"
    assert run["wait_kind"] == "signal"
    assert run["wait_reason"] == "Waiting for signal [approved-by]"
    assert run["started_at"].endswith("+00:00")
    assert body["actions"].pop("can_archive") is False  # open: nothing to archive yet
    assert all(body["actions"].values())
    assert WorkflowCommand.objects.filter(instance_id="d-1").count() == 1  # no command row

    WorkflowStub.load("d-1").terminate()
    closed = client.get("/webhooks/instances/d-1/describe").json()
    assert closed["run"]["status"] == "terminated"
    assert closed["run"]["status_bucket"] == "failed"
    assert closed["run"]["closed_reason"] == "terminated"
    assert closed["actions"].pop("can_archive") is True  # closed: archive is all it takes
    assert not any(closed["actions"].values())
    WorkflowStub.load("d-1").archive()
    archived = client.get("/webhooks/instances/d-1/describe").json()
    assert archived["run"]["archived_at"].endswith("+00:00")
    assert not any(archived["actions"].values())

    historical = client.get(f"/webhooks/instances/loop-1/runs/{looped['old']}/describe").json()
    assert historical["run"]["is_current_run"] is False
    assert historical["actions"].pop("can_archive") is True
    assert not any(historical["actions"].values())
    assert historical["run_count"] == 2

    missing_run = client.get(
        "/webhooks/instances/loop-1/runs/01a22724-dcfc-7872-bc9f-b4556a9afc5e/describe"
    )
    assert missing_run.status_code == 200
    assert missing_run.json()["reason"] == "run_not_found"
    assert missing_run.json()["run"] is None

    missing = client.get("/webhooks/instances/nobody/describe")
    assert missing.status_code == 404
    assert missing.json()["found"] is False
    assert missing.json()["reason"] == "instance_not_found"
    assert missing.json()["run_count"] == 0


# ------------------------------------------------------------ control plane
def test_control_plane_start(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "ALLOW_UNAUTHENTICATED": True,
        "CONTROL_PLANE_QUEUES": ["default"],
    }
    url = "/webhooks/control-plane/start"
    body = {
        "workflow_type": "webhooks.order",
        "instance_id": "cp-1",
        "arguments": '{"order_id": 123}',
        "queue": "default",  # allowed by the CONTROL_PLANE_QUEUES setting below
        "business_key": "order-123",
        "labels": {"tenant": "acme"},
    }
    started = post(client, url, body)
    assert started.status_code == 202
    document = started.json()
    assert document["started"] is True
    assert document["outcome"] == "started_new"
    assert document["workflow_instance_id"] == "cp-1"
    assert document["task_id"]
    assert document["reason"] is None
    run = WorkflowRun.objects.get(id=document["workflow_run_id"])
    assert (run.queue, run.business_key) == ("default", "order-123")

    rejected = post(client, url, body)
    assert rejected.status_code == 409
    assert rejected.json()["outcome"] == "rejected_duplicate"
    reused = post(client, url, {**body, "duplicate_start_policy": "return_existing_active"})
    assert reused.status_code == 200
    assert reused.json()["outcome"] == "returned_existing_active"

    generated = post(client, url, {"workflow_type": "webhooks.order", "arguments": [5]})
    assert generated.status_code == 202
    assert generated.json()["workflow_instance_id"]

    before = row_counts()
    assert post(client, url, {"instance_id": "cp-2"}).status_code == 422
    assert post(client, url, {**body, "instance_id": "bad id"}).status_code == 422
    assert post(client, url, {**body, "instance_id": "cp-3", "arguments": "{"}).status_code == 422
    assert post(client, url, {**body, "instance_id": "cp-3", "arguments": []}).status_code == 422
    assert post(client, url, {**body, "workflow_type": "webhooks.hidden"}).status_code == 404
    assert row_counts() == before


def test_control_plane_queue_and_connection_are_limited_to_an_allow_list(client, settings):
    """Issue 18, item 4: by default a control-plane start keeps the workflow's own routing."""
    url = "/webhooks/control-plane/start"
    body = {"workflow_type": "webhooks.order", "instance_id": "cp-q", "arguments": [1]}
    before = row_counts()
    for field, value in (("queue", "payments-admin"), ("connection", "other-broker")):
        response = post(client, url, {**body, field: value})
        assert response.status_code == 422
        assert response.json()["reason"] == f"{field}_not_allowed"
        assert list(response.json()["validation_errors"]) == [field]
    assert row_counts() == before
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "CONNECTIONS": {"other-broker": "tests.celery_app.app"},
    }
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "ALLOW_UNAUTHENTICATED": True,
        "CONTROL_PLANE_QUEUES": ["payments-admin"],
        "CONTROL_PLANE_CONNECTIONS": ["other-broker"],
    }
    allowed = post(client, url, {**body, "queue": "payments-admin", "connection": "other-broker"})
    assert allowed.status_code == 202, allowed.json()
    run = WorkflowRun.objects.get(id=allowed.json()["workflow_run_id"])
    assert (run.queue, run.connection) == ("payments-admin", "other-broker")
    own = post(client, url, {**body, "instance_id": "cp-own", "queue": None})
    assert own.status_code == 202
    assert WorkflowRun.objects.get(id=own.json()["workflow_run_id"]).connection is None


def test_allow_listed_connections_must_be_configured(settings):
    from durable_workflow.exceptions import ConfigurationError
    from durable_workflow.webhooks.conf import webhook_settings

    settings.DURABLE_WORKFLOW_WEBHOOKS = {"CONTROL_PLANE_CONNECTIONS": ["nowhere"]}
    with pytest.raises(ConfigurationError, match="nowhere"):
        webhook_settings()


# ------------------------------------------------------------ not exposed
def test_unexposed_workflows_are_404_on_every_instance_route(client):
    stub = WorkflowStub.make("webhooks.hidden", "hidden-1")
    stub.start()
    run_id = stub.run_id()
    before = row_counts()
    for prefix in ("/webhooks/instances/hidden-1/", f"/webhooks/instances/hidden-1/runs/{run_id}/"):
        for suffix in (
            "signals/approved-by",
            "queries/x",
            "updates/x",
            "cancel",
            "terminate",
            "repair",
        ):
            assert post(client, prefix + suffix).status_code == 404, prefix + suffix
        assert client.get(prefix + "describe").status_code == 404
        assert client.get(prefix + "updates/" + UNKNOWN_UUID).status_code == 404
    assert row_counts() == before


def test_explicit_exposure_setting(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "ALLOW_UNAUTHENTICATED": True,
        "WORKFLOWS": {"secret-approval": "webhooks.hidden"},
    }
    response = post(client, "/webhooks/start/secret-approval", {"workflow_id": "exp-1"})
    assert response.status_code == 202
    assert client.get("/webhooks/instances/exp-1/describe").status_code == 200


def test_views_are_csrf_exempt_and_outside_atomic_requests(client, settings):
    from django.urls import resolve

    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.middleware.csrf.CsrfViewMiddleware"]
    client.handler.enforce_csrf_checks = True
    response = post(client, ORDER, {"workflow_id": "csrf-1", "order_id": 1})
    assert response.status_code == 202  # no CSRF token, no cookie: machines call these
    view = resolve("/webhooks/instances/csrf-1/updates/mark-ready").func
    assert "default" in view._non_atomic_requests
    assert view.csrf_exempt is True


def test_opt_in_is_not_inherited_and_routes_takes_an_explicit_map(client):
    from durable_workflow import registry
    from durable_workflow.webhooks import exposure, routes
    from tests.testapp.webhook_workflows import WebhookOrder

    class SubOrder(WebhookOrder):
        type_key = "webhooks.sub-order"

    try:
        assert "webhooks.sub-order" not in exposure.alias_map().values()
        assert exposure.alias_map([SubOrder]) == {"webhooks.sub-order": "webhooks.sub-order"}
        assert exposure.alias_map({"orders": SubOrder}) == {"orders": "webhooks.sub-order"}
        names = {pattern.name for pattern in routes([SubOrder])}
        assert {"start", "run-update", "instance-describe", "control-plane-start"} <= names
    finally:
        registry._workflows.pop("webhooks.sub-order", None)


@pytest.mark.parametrize("path", ["nope", "instances//signals/x", "instances/%2F%0A/signals/x"])
def test_unknown_routes_answer_json_404(client, path):
    response = post(client, "/webhooks/" + path)
    assert response.status_code == 404
    assert response.json()["reason"] == "unknown_route"
