"""Hostile and unstorable texts: NUL bytes, lone surrogates, exceptions whose ``str()`` raises.

Where the engine records a failure the text is escaped, so the failure is recorded once and
the retry policy applies; where a caller hands a value in, it is refused with a typed error
before anything is written.
"""

from __future__ import annotations

import pytest

from durable_workflow import clock, executor
from durable_workflow.conf import get_settings
from durable_workflow.testing import travel
from tests.integration.helpers import events_of, failures, start
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["nul", "surrogate", "unprintable"]


def drive(inline, stub, *, rounds: int = 10) -> list[BaseException]:
    """Run what is ready; on an error, let the leases lapse and repair, as a fleet would."""
    errors: list[BaseException] = []
    for _ in range(rounds):
        try:
            inline.run()
        except Exception as exc:  # what a Celery worker would log, and ack
            errors.append(exc)
        if not stub.refresh().running():
            break
        travel(seconds=get_settings().ACTIVITY_LEASE_SECONDS + 1)
        executor.repair_pass(now=clock.now())
    return errors


@pytest.mark.parametrize("mode", MODES)
def test_an_activity_error_is_recorded_once_per_attempt_and_retried_by_policy(inline, mode):
    """Reported: on PostgreSQL a NUL byte in the error made the attempt's settle fail, so the
    activity ran again after each lease expiry, 6 times for ``tries = 2``, the error lost."""
    stub = start("tests.hostile-activity", f"hostile-activity-{mode}", mode, 2)
    errors = drive(inline, stub)
    assert errors == []
    assert Invocation.objects.filter(name="hostile").count() == 2
    assert stub.refresh().status() == "failed"
    (retry,) = events_of(stub, "ActivityRetryScheduled")
    (failed,) = events_of(stub, "ActivityFailed")
    activity_failure = failures(stub)[0]
    assert activity_failure.failure_category == "activity"
    if mode == "nul":
        expected = "card\\x00declined"
    elif mode == "surrogate":
        expected = "card \\udcff declined"
    else:
        expected = "<unprintable Unprintable: str() raised RuntimeError>"
    assert retry["message"] == failed["message"] == activity_failure.message == expected
    assert activity_failure.exception_class == "tests.testapp.hostile.Unprintable" or (
        activity_failure.exception_class == "builtins.ValueError"
    )
    assert "RaiseHostile" in activity_failure.traceback or "raise hostile_error" in (
        activity_failure.traceback
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_workflow_failure_with_a_hostile_message_is_recorded_once(inline, mode):
    """Reported: the run's failure could not be written, so its workflow task failed on
    every delivery and no failure row ever said why."""
    stub = start("tests.hostile-body", f"hostile-body-{mode}", mode)
    assert drive(inline, stub) == []
    assert stub.refresh().status() == "failed"
    (row,) = failures(stub)
    (failed,) = events_of(stub, "WorkflowFailed")
    assert row.failure_category == "application"
    assert "\x00" not in row.message and row.message == failed["message"]
    assert row.message in (
        "card\\x00declined",
        "card \\udcff declined",
        "<unprintable Unprintable: str() raised RuntimeError>",
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_caught_hostile_failure_is_recorded_as_handled(inline, mode):
    stub = start("tests.hostile-body", f"hostile-caught-{mode}", f"caught-{mode}")
    assert drive(inline, stub) == []
    assert stub.refresh().output() == "caught"
    (handled,) = events_of(stub, "FailureHandled")
    assert "\x00" not in handled["message"]
    handled["message"].encode("utf-8")  # storable, whatever the database


@pytest.mark.parametrize("mode", MODES)
def test_validator_and_update_messages_are_stored_escaped(inline, mode):
    stub = start("tests.hostile-updates", f"hostile-updates-{mode}")
    inline.run()
    refused = stub.attempt_update("check", mode, wait_timeout=0)
    assert refused.rejected and refused.rejection_reason == "validation_failed"
    assert refused.failure_message in (
        "card\\x00declined",
        "card \\udcff declined",
        "<unprintable Unprintable: str() raised RuntimeError>",
    )
    submitted = stub.submit_update("poke", mode)
    inline.run()
    failed = stub.inspect_update(submitted.update_id)
    assert failed.failed and failed.failure_message == refused.failure_message
    stub.submit_update("finish")
    inline.run()
    assert stub.refresh().output() == "done"


BAD_NAMES = {
    "nul": "approved\x00by",
    "surrogate": "approved-\udcff",
    "control": "approved\x1bby",
    "empty": "",
    "long": "x" * 256,
}


def _written() -> tuple[int, int]:
    from durable_workflow.models import HistoryEvent, WorkflowCommand

    return WorkflowCommand.objects.count(), HistoryEvent.objects.count()


@pytest.mark.parametrize("kind", sorted(BAD_NAMES))
def test_names_are_refused_before_anything_is_written(inline, kind):
    from durable_workflow import InvalidValueError

    stub = start("tests.approval", f"bad-name-{kind}", "signal")
    inline.run()
    before = _written()
    name = BAD_NAMES[kind]
    calls = [
        lambda: stub.signal(name, "ada"),
        lambda: stub.attempt_signal(name, "ada"),
        lambda: stub.signal_with_start(name, "ada", start_args=["signal"]),
        lambda: stub.submit_update(name),
        lambda: stub.attempt_update(name, wait_timeout=0),
        lambda: stub.query(name),
    ]
    for call in calls:
        with pytest.raises(InvalidValueError) as raised:
            call()
        assert raised.value.field.endswith("name") and raised.value.reason
    assert _written() == before


@pytest.mark.parametrize("kind", ["nul", "surrogate", "control"])
def test_reasons_and_stream_fields_are_refused(inline, kind):
    from durable_workflow import InvalidValueError

    stub = start("tests.approval", f"bad-reason-{kind}", "signal")
    inline.run()
    before = _written()
    bad = BAD_NAMES[kind]
    calls = [
        lambda: stub.cancel(reason=bad),
        lambda: stub.terminate(reason=bad),
        lambda: stub.repair(reason=bad),
        lambda: stub.send_message(bad),
        lambda: stub.send_message("inbox", correlation_id=bad),
    ]
    if kind != "control":  # JSON carries control characters; not NUL or surrogates
        calls.append(lambda: stub.send_message("inbox", metadata={"k": bad}))
    for call in calls:
        with pytest.raises(InvalidValueError):
            call()
    assert _written() == before
    assert stub.refresh().running()


def test_a_reason_may_span_lines_and_be_long():
    from durable_workflow.text import REASON_MAX, check_reason

    assert check_reason("line one\nline two\ttab") == "line one\nline two\ttab"
    assert check_reason("r" * REASON_MAX) == "r" * REASON_MAX


@pytest.mark.parametrize(
    "options",
    [
        {"memo": {"note": "a\x00b"}},
        {"memo": {"note": ["ok", {"deep": "\udcff"}]}},
        {"memo": {"k\x00": 1}},
        {"search_attributes": {"customer": "acme\x00"}},
        {"labels": {"team": "ops\udcff"}},
        {"labels": {"": "x"}},
        {"business_key": "order\x00-1"},
        {"business_key": "k" * 256},
    ],
)
def test_start_options_refuse_unstorable_values(options):
    from durable_workflow import InvalidValueError, StartOptions

    with pytest.raises(InvalidValueError):
        StartOptions(**options)


def test_loading_an_unusable_instance_id_touches_no_database(django_assert_num_queries):
    from durable_workflow import InvalidInstanceIdError, WorkflowStub

    with django_assert_num_queries(0), pytest.raises(InvalidInstanceIdError):
        WorkflowStub.load("order\x00-1")


@pytest.mark.parametrize(
    "field, value",
    [
        ("memo", {"note": "a\x00b"}),
        ("labels", {"team": "\udcff"}),
        ("search_attributes", {"customer": "acme\x00"}),
        ("notes", "a\x00b"),
        ("queue", "q\x00"),
    ],
)
def test_schedules_refuse_unstorable_values_on_create_and_update(field, value):
    from durable_workflow import InvalidValueError
    from durable_workflow.models import WorkflowSchedule
    from durable_workflow.schedules import ScheduleManager
    from durable_workflow.schedules.errors import InvalidScheduleError

    with pytest.raises(InvalidScheduleError):
        ScheduleManager.create(
            schedule_id="hostile",
            workflow="tests.sleeper",
            cron_expression="* * * * *",
            arguments=[1],
            **{field: value},
        )
    assert not WorkflowSchedule.objects.exists()
    ScheduleManager.create(
        schedule_id="hostile", workflow="tests.sleeper", cron_expression="* * * * *", arguments=[1]
    )
    with pytest.raises(InvalidScheduleError):
        ScheduleManager.update("hostile", **{field: value})
    with pytest.raises(InvalidValueError):
        ScheduleManager.pause("hostile", reason="a\x00b")
    assert ScheduleManager.describe("hostile").status == "active"


def test_an_unusable_schedule_id_is_not_found_without_a_query(django_assert_num_queries):
    from durable_workflow.schedules import ScheduleManager
    from durable_workflow.schedules.errors import ScheduleNotFoundError

    with django_assert_num_queries(0), pytest.raises(ScheduleNotFoundError):
        ScheduleManager.describe("nightly\x00")
