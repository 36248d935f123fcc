"""A due timer whose run is warm in another live worker replays the run in place when
its history is short (``TIMER_REPLAY_IN_PLACE_MAX_EVENTS``), instead of sending the
woken workflow task to that worker.

Two registered workers, ``w1`` and ``w2``, are played by this one process in turn, each
with a sticky cache of its own (a warm body lives in one process only). The dispatch
backend only records messages, so a workflow task not run in place shows up as one.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

import durable_workflow as dw
from durable_workflow import Workflow, WorkflowStub, clock, executor
from durable_workflow.executor import dispatch, routing, sticky
from durable_workflow.executor.identity import set_registered_worker_id
from durable_workflow.models import Task, WorkflowRun
from durable_workflow.transport import worker as worker_transport
from tests.engine_db import connection
from tests.integration.helpers import Recorder, event_types, register_worker, start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)

NAP = 60


class Naps(Workflow):
    """``padding`` side effects (a longer history), then ``naps`` timers in a row."""

    type_key = "tests.timer-replay-in-place.naps"

    def handle(self, naps: int, padding: int) -> list[int]:
        seen = [dw.side_effect(lambda index=index: index) for index in range(padding)]
        for _ in range(naps):
            dw.timer(NAP)
            seen.append(len(seen))
        return seen


def dw_settings(**more: Any) -> dict[str, Any]:
    return {**settings.DURABLE_WORKFLOW, "EAGER_WORKFLOW_TASKS": True, **more}


class Fleet:
    """This process acting as ``w1`` or ``w2`` (registration, direct queue, warm bodies)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, recorder: Recorder) -> None:
        self.monkeypatch = monkeypatch
        self.sent = recorder.sent
        self.caches = {"w1": sticky.StickyCache(), "w2": sticky.StickyCache()}

    @property
    def woken(self) -> list[tuple[str, str | None, float | None]]:
        """The workflow tasks' messages sent (a next timer's message is left out)."""
        return [message for message in self.sent if message[0] == "workflow"]

    def be(self, worker_id: str | None) -> None:
        direct = f"dw.direct.{worker_id}" if worker_id else None
        set_registered_worker_id(worker_id, direct_queue=direct)
        worker_transport._state.update(worker_id=worker_id, direct_queue=direct)
        if worker_id is not None:
            self.monkeypatch.setattr(sticky, "cache", self.caches[worker_id])

    @staticmethod
    def nap() -> None:
        """The timers come due; both workers still beat (their sticky lease holds)."""
        clock.advance(dt.timedelta(seconds=NAP + 1))
        register_worker("w1")
        register_worker("w2")
        routing.forget()


@pytest.fixture
def fleet(monkeypatch):
    clock.freeze()
    routing.forget()
    recorder = Recorder()
    previous = dispatch.set_backend(recorder)
    saved = dict(worker_transport._state)
    register_worker("w1")
    register_worker("w2")
    fleet = Fleet(monkeypatch, recorder)
    with override_settings(DURABLE_WORKFLOW=dw_settings()):
        yield fleet
    fleet.be(None)
    worker_transport._state.clear()
    worker_transport._state.update(saved)
    dispatch.set_backend(previous)
    routing.forget()
    clock.reset()


def warm_in_w1(fleet: Fleet, instance_id: str, *, naps: int = 1, padding: int = 0) -> WorkflowStub:
    """A run whose first workflow task ``w1`` ran (and keeps warm), its timer now due,
    with this process acting as ``w2``."""
    fleet.be("w1")
    stub = start(Naps.type_key, instance_id, naps, padding)
    (first,) = tasks_of(stub, "workflow")
    assert executor.run_workflow_task(first.id) == "completed"
    assert owner(stub) == "w1"
    fleet.nap()
    fleet.be("w2")
    fleet.sent.clear()
    return stub


def owner(stub: WorkflowStub) -> str | None:
    return WorkflowRun.objects.get(pk=stub.run_id()).sticky_worker_id


def fire(stub: WorkflowStub, **options: bool) -> str:
    (task,) = [t for t in tasks_of(stub, "timer") if t.status == "ready"]
    return executor.run_timer_task(task.id, **options)


HOP = [("workflow", "dw.direct.w1", None)]


def test_a_short_history_warm_in_another_worker_is_replayed_in_the_timers_transaction(
    fleet, monkeypatch
):
    stub = warm_in_w1(fleet, "replay-here", naps=2)
    commits: list[int] = []
    real_commit = connection.commit
    monkeypatch.setattr(connection, "commit", lambda: commits.append(1) or real_commit())
    assert fire(stub) == "fired"
    assert fleet.woken == []  # no workflow task's message to w1
    assert len(commits) == 1
    woken = tasks_of(stub, "workflow")[-1]
    assert woken.status == "completed"
    assert woken.sticky_replay_mode == "forced_cold_replay"
    assert fleet.caches["w2"].stats.as_dict() | {"evictions": 0} == {
        "hits": 0,
        "misses": 1,  # a cold replay: w2 never held the run
        "forced_cold": 0,
        "evictions": 0,
    }
    # The run moved to w2: w2 is its owner now, and its next task goes there.
    run = WorkflowRun.objects.get(pk=stub.run_id())
    assert run.sticky_worker_id == "w2"
    assert run.sticky_until == clock.now() + dt.timedelta(seconds=300)
    assert event_types(stub).count("TimerFired") == 1
    assert event_types(stub).count("TimerScheduled") == 2  # the body went on to its next nap


def test_the_threshold_counts_the_events_a_replay_here_would_read(fleet):
    for over, expected in [(0, []), (1, HOP)]:
        stub = warm_in_w1(fleet, f"replay-threshold-{over}")
        replayed = len(stub.history()) + 1  # with the TimerFired this transaction appends
        limit = replayed - over
        with override_settings(
            DURABLE_WORKFLOW=dw_settings(TIMER_REPLAY_IN_PLACE_MAX_EVENTS=limit)
        ):
            assert fire(stub) == "fired"
        assert (over, fleet.woken) == (over, expected)
        assert stub.refresh().status() == ("pending" if expected else "completed")


def test_a_long_history_still_goes_to_the_warm_worker_and_a_short_one_does_not(fleet):
    long = warm_in_w1(fleet, "replay-long", padding=60)
    assert len(long.history()) > 50  # the default limit
    assert fire(long) == "fired"
    assert fleet.woken == HOP
    assert long.refresh().status() == "pending"
    assert owner(long) == "w1"
    short = warm_in_w1(fleet, "replay-short", padding=5)
    assert fire(short) == "fired"
    assert fleet.woken == []
    assert short.refresh().output() == [0, 1, 2, 3, 4, 5]


#: The settings or the timer task's delivery each case makes, and whether the woken
#: workflow task then runs here ([]) or goes to the warm worker (HOP).
RULES: list[tuple[str, dict[str, Any], str, list[Any]]] = [
    ("as configured", {}, "", []),
    ("replay in place off", {"TIMER_REPLAY_IN_PLACE_MAX_EVENTS": 0}, "", HOP),
    ("eager workflow tasks off", {"EAGER_WORKFLOW_TASKS": False}, "", HOP),
    ("the message's chain used up", {"EAGER_CHAIN_LIMIT": 0}, "", HOP),
    ("the timer's message delivered again", {}, "redelivered", HOP),
    ("the timer's message re-sent", {}, "re-sent", HOP),
]


def test_replaying_here_keeps_the_rules_of_the_in_place_wake(fleet):
    """Replaying here is allowed only where running in place is: a redelivered or
    re-sent timer wakes the workflow through a counted task, and the eager switches
    hold, whatever the history's length."""
    for index, (case, more, delivery, expected) in enumerate(RULES):
        stub = warm_in_w1(fleet, f"replay-rules-{index}")
        if delivery == "re-sent":
            Task.objects.filter(run_id=stub.run_id(), task_type="timer").update(dispatch_count=2)
        with override_settings(DURABLE_WORKFLOW=dw_settings(**more)):
            assert fire(stub, redelivered=delivery == "redelivered") == "fired"
        woken = tasks_of(stub, "workflow")[-1]
        seen = (fleet.woken, bool(woken.payload.get("count_first")), woken.status)
        counted = bool(delivery)
        assert (case, *seen) == (case, expected, counted, "ready" if expected else "completed")


def test_the_old_owners_warm_body_is_not_used_after_a_replay_elsewhere(fleet):
    """w1 keeps the run warm at its first boundary; w2 replays it in place at the first
    timer; w1's next task (the second timer) must not resume its stale body."""
    stub = warm_in_w1(fleet, "replay-stale", naps=2)
    assert len(fleet.caches["w1"]) == 1  # w1's body, suspended at the first timer
    assert fire(stub) == "fired"  # w2, in place
    assert fleet.woken == [] and owner(stub) == "w2"
    fleet.nap()
    fleet.be("w1")
    assert fire(stub) == "fired"  # w1 again: the run is short, so in place too
    assert fleet.woken == []
    stats = fleet.caches["w1"].stats
    assert (stats.hits, stats.forced_cold) == (0, 1)  # found stale, replayed cold
    assert stub.refresh().status() == "completed"
    assert stub.output() == [0, 1]
    # The same run in one worker, never moved, writes the same history.
    fleet.be("w1")
    alone = start(Naps.type_key, "replay-stale-alone", 2, 0)
    (first,) = tasks_of(alone, "workflow")
    assert executor.run_workflow_task(first.id) == "completed"
    for _ in range(2):
        fleet.nap()
        fleet.be("w1")
        assert fire(alone) == "fired"
    assert alone.refresh().output() == [0, 1]
    assert event_types(stub) == event_types(alone)
    sequences = [event.sequence for event in stub.history()]
    assert sequences == list(range(1, len(sequences) + 1))
    assert event_types(stub).count("TimerFired") == 2


# ---------------------------------------------------------------- statements counted


def _round_trips(queries: CaptureQueriesContext) -> int:
    return sum(1 for q in queries.captured_queries if (q["sql"] or "") not in ("BEGIN", "COMMIT"))


def _hop(fleet: Fleet, instance_id: str) -> tuple[WorkflowStub, int, int]:
    """A run warm in ``w1`` whose timer hops there; the round trips of the timer task and
    of the workflow task it sends."""
    hop = warm_in_w1(fleet, instance_id)
    with override_settings(DURABLE_WORKFLOW=dw_settings(TIMER_REPLAY_IN_PLACE_MAX_EVENTS=0)):
        with CaptureQueriesContext(connection) as fired:
            assert fire(hop) == "fired"
        fleet.be("w1")  # the owner takes the message it was sent
        woken = Task.objects.get(run_id=hop.run_id(), task_type="workflow", status="ready")
        with CaptureQueriesContext(connection) as resumed:
            assert executor.run_workflow_task(woken.id) == "completed"
    return hop, _round_trips(fired), _round_trips(resumed)


def test_replaying_in_place_costs_fewer_round_trips_than_the_hop(fleet):
    # Both paths once first: a statement's first use on a connection also prepares it
    # (one more round trip), and which tests ran before on this connection varies.
    assert fire(warm_in_w1(fleet, "replay-trips-warm-up")) == "fired"
    _hop(fleet, "replay-trips-warm-up-hop")
    here = warm_in_w1(fleet, "replay-trips-here")
    with CaptureQueriesContext(connection) as in_place:
        assert fire(here) == "fired"
    assert here.refresh().status() == "completed" and fleet.woken == []
    hop, fired, resumed = _hop(fleet, "replay-trips-hop")
    assert hop.refresh().output() == here.output()
    if connection.vendor == "postgresql":
        # Counted the same way on both paths (this test's own read of the timer task and
        # the owner's liveness read included): 7 in one transaction in place, against 7
        # for the timer and 3 for the owner's workflow task, in two, and a message.
        assert _round_trips(in_place) < fired + resumed
