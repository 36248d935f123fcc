"""De-duplication ids on starts (issue 26): one open run per id, across instances."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from durable_workflow import (
    ConfigurationError,
    StartOptions,
    WorkflowAlreadyStartedError,
    WorkflowDeduplicatedError,
    WorkflowStub,
)
from durable_workflow.models import WorkflowCommand, WorkflowInstance, WorkflowRun
from durable_workflow.store import database
from tests.engine_db import connection

pytestmark = pytest.mark.django_db(transaction=True)

DEDUP = StartOptions(deduplication_id="invoice-42")


def test_a_second_start_with_an_open_id_is_rejected_with_a_reason(inline):
    first = WorkflowStub.make("tests.sequential", "dedup-a")
    first.start("ada", options=DEDUP)
    second = WorkflowStub.make("tests.sequential", "dedup-b")
    with pytest.raises(WorkflowDeduplicatedError) as info:
        second.start("bob", options=DEDUP)
    assert isinstance(info.value, WorkflowAlreadyStartedError)
    assert info.value.reason == "deduplication_id_in_use"
    assert info.value.holder_instance_id == "dedup-a"
    assert "dedup-a" in str(info.value)
    result = second.attempt_start("bob", options=DEDUP)
    assert (result.accepted, result.outcome, result.rejection_reason) == (
        False,
        "rejected_duplicate",
        "deduplication_id_in_use",
    )
    assert result.run_id is None and result.holder_instance_id == "dedup-a"
    command = WorkflowCommand.objects.get(id=result.command_id)
    assert (command.instance_id, command.status, command.run_id) == ("dedup-b", "rejected", None)
    assert command.metadata == {
        "deduplication_id": "invoice-42",
        "holder_instance_id": "dedup-a",
        "holder_run_id": first.run_id(),
    }
    assert WorkflowRun.objects.filter(deduplication_id="invoice-42").count() == 1
    # The refused instance is left as make() left it, startable later.
    assert WorkflowInstance.objects.get(instance_id="dedup-b").status == "reserved"
    assert second.status() == "reserved"


def test_the_id_is_free_again_once_the_holder_closes(inline):
    first = WorkflowStub.make("tests.sequential", "dedup-c")
    first.start("ada", options=DEDUP)
    inline.run()
    assert WorkflowStub.load("dedup-c").status() == "completed"
    second = WorkflowStub.make("tests.sequential", "dedup-d")
    assert second.start("bob", options=DEDUP).accepted
    assert WorkflowRun.objects.filter(deduplication_id="invoice-42").count() == 2


def test_starts_without_an_id_or_with_other_ids_are_unaffected(inline):
    WorkflowStub.make("tests.sequential", "dedup-e").start("ada", options=DEDUP)
    assert WorkflowStub.make("tests.sequential", "dedup-f").start("bob").accepted
    other = StartOptions().with_deduplication_id("invoice-43")
    assert WorkflowStub.make("tests.sequential", "dedup-g").start("cy", options=other).accepted


def test_the_instance_duplicate_policy_still_decides_for_the_same_instance(inline):
    stub = WorkflowStub.make("tests.sequential", "dedup-h")
    stub.start("ada", options=DEDUP)
    again = WorkflowStub.load("dedup-h").attempt_start(
        "ada", options=StartOptions.return_existing_active().with_deduplication_id("invoice-42")
    )
    assert again.outcome == "returned_existing_active" and again.run_id == stub.run_id()
    refused = WorkflowStub.load("dedup-h").attempt_start("ada", options=DEDUP)
    assert refused.rejection_reason == "instance_already_started"


@pytest.mark.parametrize("bad", ["", "tab\there", "x" * 192, 42, "nul\x00"])
def test_hostile_deduplication_ids_are_refused_before_anything_is_written(bad):
    with pytest.raises(ConfigurationError, match="deduplication_id"):
        StartOptions(deduplication_id=bad)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers are PostgreSQL's")
def test_two_concurrent_starts_with_one_id_start_exactly_one_run(inline):
    """The loser's insert waits on the winner's uncommitted row, then is refused."""
    WorkflowStub.make("tests.sequential", "race-a")
    WorkflowStub.make("tests.sequential", "race-b")
    inserted, release = threading.Event(), threading.Event()
    outcomes: dict[str, object] = {}

    def winner() -> None:
        try:
            with database.atomic():
                outcomes["a"] = WorkflowStub.load("race-a").attempt_start("ada", options=DEDUP)
                inserted.set()
                release.wait(30)
        finally:
            connections.close_all()

    def loser() -> None:
        try:
            outcomes["b"] = WorkflowStub.load("race-b").attempt_start("bob", options=DEDUP)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=winner), threading.Thread(target=loser)]
    threads[0].start()
    assert inserted.wait(30)
    threads[1].start()
    try:
        _wait_until_a_session_waits_on_a_lock()
    finally:
        release.set()
        for thread in threads:
            thread.join(30)
    assert outcomes["a"].accepted  # type: ignore[attr-defined]
    refused = outcomes["b"]
    assert refused.rejection_reason == "deduplication_id_in_use"  # type: ignore[attr-defined]
    assert refused.holder_instance_id == "race-a"  # type: ignore[attr-defined]
    assert WorkflowRun.objects.filter(deduplication_id="invoice-42").count() == 1


def _wait_until_a_session_waits_on_a_lock() -> None:
    """Poll ``pg_stat_activity`` (not a sleep of a guessed length) for the blocked insert."""
    for _ in range(300):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
        time.sleep(0.1)
    raise AssertionError("the second start never waited on the first one's row")
