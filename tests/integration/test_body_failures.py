"""A bug in a body parks the run on a failed workflow task; only declared failures fail it."""

from __future__ import annotations

import pytest
from django.test import override_settings

from durable_workflow import ConfigurationError, Workflow, WorkflowParkedError
from durable_workflow.models import Task
from durable_workflow.signals import workflow_task_failed
from durable_workflow.testing.replayer import Replayer
from tests.integration.helpers import event_types, failures, start
from tests.testapp import hostile
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def buggy(monkeypatch):
    monkeypatch.setitem(hostile.BUGGY, "code", "broken")
    return hostile.BUGGY


def dw_settings(**values):
    from django.conf import settings

    return override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **values})


@pytest.mark.parametrize(
    "kind, exception_class, message",
    [
        ("name", "builtins.NameError", "name 'undefined_name' is not defined"),
        ("type", "builtins.TypeError", 'unsupported operand type(s) for +: "int" and "str"'),
    ],
)
def test_a_bug_parks_the_run_and_a_fix_plus_repair_saves_it(
    inline, buggy, kind, exception_class, message
):
    """Reported: a NameError or TypeError in a body failed the run for good, so fixing the
    code could not save it."""
    announced = []
    workflow_task_failed.connect(lambda sender, event, **kw: announced.append(event), weak=False)
    try:
        stub = start("tests.buggy", f"buggy-{kind}", kind)
        inline.run()
    finally:
        workflow_task_failed.receivers.clear()
    assert stub.refresh().status() in ("pending", "waiting")
    assert "WorkflowFailed" not in event_types(stub)
    (row,) = failures(stub)
    assert (row.failure_category, row.exception_class) == ("task_failure", exception_class)
    assert row.message.replace("'", '"') == message.replace("'", '"')
    assert row.details == {"task_failure_reason": "undeclared_exception"}
    assert "hostile.py" in row.traceback
    (event,) = announced
    assert (event.event_type, event.reason, event.exception_class) == (
        "WorkflowTaskFailed",
        "undeclared_exception",
        exception_class,
    )
    described = stub.describe()
    assert described.parked and described.task_failure.exception_class == exception_class
    with pytest.raises(WorkflowParkedError):
        stub.wait(timeout=5)

    buggy["code"] = "fixed"  # deploy the fix, then repair
    stub.repair(reason="deployed the fix")
    inline.run()
    assert stub.refresh().status() == "completed" and stub.output() == 2
    assert Invocation.objects.filter(name="add").count() == 1  # the step did not run again


def test_declared_failures_fail_the_run(inline, buggy):
    crashed = start("tests.crashes", "declared-1", "boom")  # failure_exception_types=[ValueError]
    final = start("tests.buggy", "declared-2", "nonretryable")  # always a failure
    inline.run()
    assert crashed.refresh().status() == "failed"
    assert failures(crashed)[0].failure_category == "application"
    assert final.refresh().status() == "failed"
    assert failures(final)[0].non_retryable is True


def test_an_unhandled_activity_failure_fails_the_run(inline):
    stub = start("tests.retrying", "declared-3", 99, 1)
    inline.run()
    assert stub.refresh().status() == "failed"
    assert [r.failure_category for r in failures(stub)] == ["activity", "application"]


def test_the_deployment_setting_declares_failures_for_every_workflow(inline, buggy):
    with dw_settings(FAILURE_EXCEPTION_TYPES=["ValueError"]):
        declared = start("tests.buggy", "setting-1", "value")
        undeclared = start("tests.buggy", "setting-2", "name")
        inline.run()
    assert declared.refresh().status() == "failed"
    assert undeclared.refresh().status() == "pending"


def test_one_line_restores_the_spec_every_exception_fails_the_run(inline, buggy):
    with dw_settings(FAILURE_EXCEPTION_TYPES=["Exception"]):
        stub = start("tests.buggy", "spec-1", "name")
        inline.run()
    assert stub.refresh().status() == "failed"
    assert failures(stub)[0].exception_class == "builtins.NameError"


def test_a_run_failed_under_another_setting_still_replays_and_answers(inline, buggy):
    with dw_settings(FAILURE_EXCEPTION_TYPES=["builtins.ValueError"]):
        stub = start("tests.buggy", "replay-1", "value")
        inline.run()
    assert stub.refresh().status() == "failed"
    # Now ValueError is undeclared again; the recorded failure still replays clean.
    result = Replayer().replay_run(stub.run_id())
    assert result.closed_by == "WorkflowFailed"


def test_a_bug_in_a_signal_handler_parks_the_run(inline, monkeypatch):
    from tests.testapp.messaging import Handlers

    def broken(self, reason):
        raise LookupError(f"no handler for {reason}")

    stub = start("tests.handlers", "handler-bug", 1)
    inline.run()
    monkeypatch.setattr(Handlers, "on_note", broken)
    stub.signal("note", "first")
    inline.run()
    assert stub.refresh().running()
    assert stub.describe().task_failure.exception_class == "builtins.LookupError"


def test_a_parked_task_is_not_retried_by_itself(inline, buggy):
    from durable_workflow import executor

    stub = start("tests.buggy", "not-retried", "name")
    inline.run()
    executor.repair_pass()
    inline.run()
    workflow_tasks = Task.objects.filter(run_id=stub.run_id(), task_type="workflow")
    assert [t.status for t in workflow_tasks.order_by("created_at")] == ["completed", "failed"]


def test_declarations_are_checked_where_they_are_made():
    with pytest.raises(ConfigurationError):

        class Bad(Workflow):
            type_key = "tests.bad-failure-types"
            abstract = True
            failure_exception_types = [42]

    with pytest.raises(ConfigurationError), dw_settings(FAILURE_EXCEPTION_TYPES=[""]):
        from durable_workflow.conf import get_settings

        get_settings()
