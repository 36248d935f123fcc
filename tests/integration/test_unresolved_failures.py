"""Issue 23, item 2: a replayed failure whose class resolves to nothing stops the replay.

It once became a plain ``ActivityFailed``: after a refactor moved an exception class,
an ``except MovedError:`` in the body stopped matching and the workflow changed course.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from durable_workflow import UnresolvedFailureError
from durable_workflow.models import HistoryEvent
from durable_workflow.operations.doctor import run_checks
from durable_workflow.operations.replay import replay_instance
from durable_workflow.testing.inline import run_ready_tasks
from tests.integration.helpers import event_types, failures, start

pytestmark = pytest.mark.django_db(transaction=True)

MOVED = "billing.errors.OldDeclined"


def fail_with_a_moved_class(instance_id):
    """Run until the activity failed, then rewrite its failure as if its class had been
    ``billing.errors.OldDeclined`` (a class that no longer exists anywhere)."""
    stub = start("tests.catch-failure", instance_id)
    with pytest.raises(RuntimeError):  # stops after the workflow task and the activity
        run_ready_tasks(max_tasks=2)
    event = HistoryEvent.objects.get(run_id=stub.run_id(), event_type="ActivityFailed")
    payload = {**event.payload, "exception_type": MOVED, "exception_class": MOVED}
    HistoryEvent.objects.filter(id=event.id).update(payload=payload)
    return stub


def test_the_run_parks_instead_of_taking_another_branch(inline):
    stub = fail_with_a_moved_class("unresolved-1")
    inline.run()
    assert stub.refresh().status() in ("pending", "waiting")
    assert event_types(stub)[-1] == "ActivityFailed"  # nothing after it: the body never saw it
    (row,) = [row for row in failures(stub) if row.source_kind == "workflow_task"]
    assert row.exception_class == "durable_workflow.exceptions.UnresolvedFailureError"
    assert row.details == {"task_failure_reason": "unresolved_failure"}
    assert MOVED in row.message
    assert stub.describe().parked

    (check,) = run_checks(only=("durable_resume_paths",))
    assert check.details["unresolved_failure"] == ["unresolved-1"]
    assert "resolves to nothing" in check.message


def test_an_alias_and_a_repair_let_it_go_on(inline):
    stub = fail_with_a_moved_class("unresolved-2")
    inline.run()
    aliases = {MOVED: "tests.testapp.workflows.PaymentDeclined"}
    with override_settings(
        DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "EXCEPTION_CLASS_ALIASES": aliases}
    ):
        stub.repair(reason="mapped the moved class")
        inline.run()
        assert stub.refresh().status() == "completed"
        assert stub.output()["caught"]["type"] == "PaymentDeclined"
        assert replay_instance("unresolved-2").ok
        (check,) = run_checks(only=("durable_resume_paths",))
        assert check.status == "ok"


def test_replaying_it_raises_the_typed_error():
    from durable_workflow.engine import failures as engine_failures
    from durable_workflow.exceptions import ActivityFailed

    with pytest.raises(UnresolvedFailureError) as info:
        engine_failures.rebuild(
            ActivityFailed,
            {"exception_type": MOVED, "exception_class": MOVED, "failure_id": "f-1"},
        )
    assert (info.value.exception_type, info.value.failure_id) == (MOVED, "f-1")
