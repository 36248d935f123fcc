"""Every line the engine logs says which workflow it is about, as record fields."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from durable_workflow import clock, executor, logs
from durable_workflow.executor import activity_task
from durable_workflow.models import ActivityExecution, Task
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lines(caplog):
    """The records logged (INFO and up), with the filter on the handler too, as a project
    puts it to give its own loggers' lines the workflow's fields."""
    caplog.set_level(logging.INFO)
    context = logs.WorkflowContextFilter()
    caplog.handler.addFilter(context)
    yield caplog
    caplog.handler.removeFilter(context)


def fields(record: logging.LogRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in logs.FIELDS}


def engine(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.startswith("durable_workflow") and text in r.getMessage()
    ]


def test_activity_attempts_and_their_retries_carry_the_attempt(inline, lines):
    stub = start("tests.retrying", "log-retry", 3)
    inline.run()
    assert stub.refresh().output() == "ok after 3"
    run = {
        "dw_workflow_type": "tests.retrying",
        "dw_instance_id": "log-retry",
        "dw_run_id": stub.run_id(),
    }
    execution = str(ActivityExecution.objects.get(run_id=stub.run_id()).id)
    failed = engine(lines, "attempt")
    assert [fields(r) for r in failed] == [
        {**run, "dw_activity_id": execution, "dw_attempt": n} for n in (1, 2)
    ]
    assert "tests.retrying instance 'log-retry'" in failed[0].getMessage()  # still in the text
    assert "retry in 0 s" in failed[0].getMessage()
    # The activity's own logger, through a handler with the filter on it.
    calls = [r for r in lines.records if r.name == "tests.activities"]
    assert [fields(r) for r in calls] == [
        {**run, "dw_activity_id": execution, "dw_attempt": n} for n in (1, 2, 3)
    ]
    # A workflow body's own line: the run, no activity.
    body = [r for r in lines.records if r.name == "tests.workflows"]
    assert body and all(
        fields(r) == {**run, "dw_activity_id": None, "dw_attempt": None} for r in body
    )


def test_a_final_activity_failure_says_so_with_its_fields(inline, lines):
    stub = start("tests.retrying", "log-final", 99, 1)
    inline.run()
    (line,) = engine(lines, "no attempts left")
    assert fields(line)["dw_run_id"] == stub.run_id()
    assert fields(line)["dw_attempt"] == 1 and fields(line)["dw_activity_id"]


def test_a_failing_workflow_task_and_its_parking_carry_the_run(
    inline, lines, settings, monkeypatch
):
    from durable_workflow.executor import feeding as module

    def persist(*args, **kwargs):
        raise RuntimeError("persist exploded")

    monkeypatch.setattr(module, "persist", persist)
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "WORKFLOW_TASK_MAX_ATTEMPTS": 2}
    stub = start("tests.sequential", "log-poison", "ada")
    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow")
    with pytest.raises(RuntimeError):
        executor.run_workflow_task(task.id)
    Task.objects.filter(id=task.id).update(dispatch_count=task.dispatch_count + 1)
    assert executor.run_workflow_task(task.id) == "failed"
    expected = {
        "dw_workflow_type": "tests.sequential",
        "dw_instance_id": "log-poison",
        "dw_run_id": stub.run_id(),
        "dw_activity_id": None,
        "dw_attempt": None,
    }
    (counted,) = engine(lines, "failed (attempt 1)")
    (parked,) = engine(lines, "repeated_attempts")
    assert fields(counted) == expected and fields(parked) == expected
    assert parked.levelno == logging.ERROR and "instance 'log-poison'" in parked.getMessage()
    assert logs.current() == dict.fromkeys(logs.FIELDS)  # nothing stays behind


def test_the_repair_pass_names_each_run_it_repairs(inline, lines):
    stub = start("tests.sequential", "log-repair", "ada")
    executor.run_workflow_task(Task.objects.get(run_id=stub.run_id(), status="ready").id)
    task = Task.objects.get(run_id=stub.run_id(), task_type="activity", status="ready")
    assert activity_task._claim(task.id) is not None  # the attempt "hangs"
    clock.advance(dt.timedelta(seconds=301))
    assert executor.repair_pass().reclaimed == 1
    (line,) = engine(lines, "expired lease")
    assert fields(line) == {
        "dw_workflow_type": "tests.sequential",
        "dw_instance_id": "log-repair",
        "dw_run_id": stub.run_id(),
        "dw_activity_id": str(task.activity_execution_id),
        "dw_attempt": None,
    }
    (summary,) = engine(lines, "repair pass:")  # about no run: the fields are there, empty
    assert fields(summary) == dict.fromkeys(logs.FIELDS)


def test_an_extra_field_given_by_the_caller_wins():
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logs.get_logger("durable_workflow.tests")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with logs.scope(instance_id="outer", run_id="r1"):
            with logs.scope(attempt=2):
                logs.bind(workflow_type="t")
                logger.warning("inner", extra={"dw_instance_id": "given"})
            logger.warning("outer")
        logger.warning("outside")
        logs.bind(instance_id="leaks?")
        logger.warning("still outside")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    assert [fields(r) for r in records] == [
        {
            "dw_workflow_type": "t",
            "dw_instance_id": "given",
            "dw_run_id": "r1",
            "dw_activity_id": None,
            "dw_attempt": 2,
        },
        {**dict.fromkeys(logs.FIELDS), "dw_instance_id": "outer", "dw_run_id": "r1"},
        dict.fromkeys(logs.FIELDS),
        dict.fromkeys(logs.FIELDS),
    ]
    assert len([f for f in logger.filters if isinstance(f, logs.WorkflowContextFilter)]) == 1
    assert logs.get_logger("durable_workflow.tests") is logger
    assert len(logger.filters) == 1


def test_a_run_scope_drops_the_attempt_of_the_enclosing_scope():
    class Run:
        id = "r2"
        instance_id = "i2"
        workflow_type = "t2"

    with logs.scope(instance_id="i2", run_id="r2", activity_id="a", attempt=3):
        with logs.run_scope(Run()):
            inner = logs.current()
        outer = logs.current()
    assert inner == {
        "dw_workflow_type": "t2",
        "dw_instance_id": "i2",
        "dw_run_id": "r2",
        "dw_activity_id": None,
        "dw_attempt": None,
    }
    assert outer["dw_attempt"] == 3
