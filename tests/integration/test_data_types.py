"""Every supported type through every boundary, in fake mode (SQLite and PostgreSQL).

The same round trip runs through a real Celery worker in
tests/acceptance/test_data_types_worker.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from durable_workflow import (
    ModelRef,
    PayloadCodecError,
    UpdateFailedError,
    UpdateHandlerFailedError,
    UpdateRejectedError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowParkedError,
    WorkflowResultTimeoutError,
    WorkflowStub,
    WorkflowTerminatedError,
)
from durable_workflow.converter import from_plain
from durable_workflow.models import HistoryEvent, WorkflowRun
from durable_workflow.testing import Replayer, export_history
from tests.testapp.data_types import Color, Point, RoundTrip, RowWorkflow, Seen, sample
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db


def identical(a: Any, b: Any) -> bool:
    """Equal and of the same type all the way down: zones, folds, Decimal exponents."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(identical(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dt.datetime):
        return (a, a.tzinfo, a.fold, a.replace(tzinfo=None)) == (
            b,
            b.tzinfo,
            b.fold,
            b.replace(tzinfo=None),
        )
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple()
    return bool(a == b)


WHEN = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)


def run_round_trip(settle: Any, instance_id: str) -> tuple[WorkflowStub[Any, Seen], Seen]:
    bundle = sample()
    stub = WorkflowStub.make(RoundTrip, instance_id)
    stub.start(bundle, WHEN)
    settle()
    stub.signal(RoundTrip.on_bundle, bundle)
    settle()  # an update waits for pending signals to be applied
    assert identical(stub.update(RoundTrip.swap, bundle), bundle)
    assert identical(stub.query(RoundTrip.latest, Color.RED), bundle)
    stub.signal("go")
    settle()
    stub.refresh().signal(RoundTrip.on_bundle, bundle)  # the continued run
    settle()
    stub.update(RoundTrip.swap, bundle)
    stub.signal("go")
    settle()
    return stub, stub.result(timeout=60)


def assert_every_receiver_got_the_bundle(seen: Seen) -> None:
    bundle = sample()
    assert seen.generation == 2 and identical(seen.when, WHEN)
    for name in ("start", "activity", "local", "child", "side_effect", "signal", "update"):
        assert identical(getattr(seen, name), bundle), name


def test_every_type_round_trips_through_every_boundary(workflow_fake):
    stub, seen = run_round_trip(lambda: None, "types-fake")
    assert_every_receiver_got_the_bundle(seen)
    run = WorkflowRun.objects.filter(instance_id=stub.id()).order_by("run_number").first()
    assert run is not None
    memo = {key: from_plain(value) for key, value in run.memo.items()}  # JSON, tagged
    assert identical(memo["when"], WHEN) and identical(memo["amount"], Decimal("1.50"))
    assert from_plain(run.memo["point"], Point) == Point(3)


def test_the_export_bundle_replays_with_typed_values(workflow_fake):
    stub, _ = run_round_trip(lambda: None, "types-export")
    for run in WorkflowRun.objects.filter(instance_id=stub.id()):
        result = Replayer().replay(export_history(run.id))
        assert result.closed_by in ("WorkflowCompleted", "WorkflowContinuedAsNew")


def test_the_json_codec_carries_every_type(workflow_fake, settings):
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "PAYLOAD_CODEC": "json"}
    stub, seen = run_round_trip(lambda: None, "types-json")
    assert WorkflowRun.objects.get(id=stub.run_id()).payload_codec == "json"
    assert_every_receiver_got_the_bundle(seen)


# ------------------------------------------------------------------ model instances
def test_a_model_instance_reaches_an_activity_as_its_row(workflow_fake):
    row = Invocation.objects.create(name="row-1")
    stub = WorkflowStub.make(RowWorkflow, "rows-1")
    stub.start(ModelRef.of(row))
    out = stub.result(timeout=10)
    assert out["body_got"] == "ModelRef" and out["label"] == "testapp.invocation"
    assert out["activity"] == {"name": "row-1", "same": True, "type": "Invocation"}
    started = HistoryEvent.objects.get(run_id=stub.run_id(), event_type="WorkflowStarted")
    assert "row-1" not in str(started.payload)  # an identifier, never the row's fields


def test_a_deleted_row_is_a_clear_typed_error_in_the_activity(workflow_fake):
    row = Invocation.objects.create(name="row-2")
    stub = WorkflowStub.make(RowWorkflow, "rows-2")
    stub.start(row, True)  # the instance itself works too at run time
    failure = stub.result(timeout=10)["failure"]
    assert failure["is_model_error"] is True
    assert failure["type"].endswith("ModelInstanceNotFoundError")
    assert f"pk={row.pk}" in failure["message"]


def test_an_unsaved_model_instance_is_refused_at_the_call(workflow_fake):
    stub = WorkflowStub.make(RowWorkflow, "rows-3")
    with pytest.raises(PayloadCodecError, match=r"argument 1: .*save the instance first"):
        stub.start(Invocation(name="unsaved"))
    assert not WorkflowRun.objects.filter(instance_id="rows-3").exists()


# ------------------------------------------------------------------ refused values
def test_a_refused_activity_argument_fails_at_its_call_and_records_nothing(workflow_fake):
    stub = WorkflowStub.make("tests.types.refuses", "refuses-1")
    stub.start()
    out = stub.result(timeout=10)
    assert out["path"] == 'argument 2 → "items"[1] → "when"'
    assert out["steps_after"] == "hello Ada"  # the step numbering stayed aligned
    kinds = [e.event_type for e in stub.history()]
    assert kinds.count("ActivityScheduled") == 1


def test_result_raises_typed_errors(workflow_fake):
    failing = WorkflowStub.make("tests.crashes", "typed-failed")
    failing.start("boom")
    with pytest.raises(WorkflowFailedError) as info:
        failing.result(timeout=5)
    error = info.value
    assert error.exception_type and "boom" in error.message and "Traceback" in error.traceback
    assert error.original is ValueError  # known to this process, found without an import

    cancelled = WorkflowStub.make("tests.cancellable", "typed-cancelled")
    cancelled.start("timer")
    cancelled.cancel("no")
    with pytest.raises(WorkflowCancelledError):
        cancelled.result(timeout=5)

    terminated = WorkflowStub.make("tests.cancellable", "typed-terminated")
    terminated.start("timer")
    terminated.terminate("stop")
    with pytest.raises(WorkflowTerminatedError):
        terminated.result(timeout=5)


def test_update_rejection_and_handler_failure_share_one_base(workflow_fake):
    stub = WorkflowStub.make("tests.approval", "typed-updates")
    stub.start("updates")
    with pytest.raises(UpdateRejectedError) as rejected:  # its validator said no
        stub.update("mark-ready", "not a boolean")
    assert rejected.value.rejected is True and "ready must be a boolean" in str(rejected.value)
    assert isinstance(rejected.value, UpdateFailedError)
    with pytest.raises(UpdateHandlerFailedError) as failed:  # its handler raised
        stub.update("add-item", "boom")
    assert failed.value.rejected is False and isinstance(failed.value, UpdateFailedError)
    assert failed.value.exception_type and "no booms allowed" in failed.value.failure_message


def test_result_raises_parked_for_a_run_parked_on_a_failed_workflow_task(workflow_fake):
    stub = WorkflowStub.make("tests.touches-orm", "typed-parked")
    stub.start()
    with pytest.raises(WorkflowParkedError) as info:
        stub.result(timeout=5)
    assert info.value.exception_type.endswith("WorkflowOrmAccessError")
    assert info.value.run_id == stub.run_id()


def test_result_times_out_with_a_typed_error(workflow_fake):
    stub = WorkflowStub.make("tests.cancellable", "typed-waiting")
    stub.start("timer")
    with pytest.raises(WorkflowResultTimeoutError):
        stub.result(timeout=0)


def test_a_body_declaring_a_model_row_is_told_to_declare_a_model_ref(workflow_fake):
    row = Invocation.objects.create(name="row-4")
    stub = WorkflowStub.make("tests.types.row-in-body", "rows-4")
    stub.start(row)
    with pytest.raises(WorkflowParkedError, match=r"declare ModelRef\[Invocation\]"):
        stub.result(timeout=5)


def test_webhook_json_reaches_a_typed_handle(client, settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    body = {
        "workflow_id": "typed-http",
        "day": "2025-01-02",
        "amount": "1.50",
        "color": "red",
        "line": {"sku": "a", "price": "2.5", "placed": "2025-01-01T00:00:00Z"},
    }
    response = client.post(
        "/webhooks/start/tests.types.webhook",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 202, response.json()
    inline.run()
    assert WorkflowStub.load("typed-http").result(timeout=5) == {
        "day": "date",
        "amount": "Decimal",
        "color": "Color",
        "line": "Line",
    }
