"""Bookkeeping that a long run's every step touches stays proportional to what is open
(the operations not done, the recorded steps not reached), not to the run's length."""

from __future__ import annotations

import pytest

from durable_workflow import NonDeterminismError
from durable_workflow.engine.events import EventType, HistoryEvent
from durable_workflow.engine.ledger import DeterminismLedger
from durable_workflow.engine.operations import ActivityOp, OperationTable, TimerOp
from durable_workflow.engine.scheduler import Future


class CountedFuture(Future):
    """A future that counts how often its ``done`` flag is read."""

    __slots__ = ("_done", "reads")

    def __init__(self, step: int) -> None:
        self.reads = 0
        self._done = False
        super().__init__(step)

    @property
    def done(self) -> bool:
        self.reads += 1
        return self._done

    @done.setter
    def done(self, value: bool) -> None:
        self._done = value


def _activity(table: OperationTable, step: int) -> CountedFuture:
    op = ActivityOp(step, "unit.noop")
    op.future = future = CountedFuture(step)
    table.add(op)
    return future


def test_open_count_counts_operations_not_done_per_kind() -> None:
    table = OperationTable()
    first, second = _activity(table, 1), _activity(table, 2)
    table.add(TimerOp(3))
    assert table.open_count("activity") == 2
    first.done = True
    assert table.open_count("activity") == 1
    assert table.open_count("timer") == 1
    second.done = True
    assert table.open_count("activity") == 0
    assert table.open_count("child") == 0
    assert [op.step for op in table.of_kind("activity")] == [1, 2]  # every one is kept


def test_a_long_sequence_of_steps_reads_each_finished_one_once() -> None:
    """A sequential run counts its open activities before each new one: finished ones
    are looked at once, not again at every later step (that grew with the run)."""
    table = OperationTable()
    futures: list[CountedFuture] = []
    for step in range(1, 1001):
        assert table.open_count("activity") == (1 if futures else 0)
        if futures:
            futures[-1].done = True
        futures.append(_activity(table, step))
    assert table.open_count("activity") == 1
    assert max(f.reads for f in futures) <= 3


def _scheduled(step: int) -> HistoryEvent:
    payload = {"sequence": step, "activity_type": "unit.noop"}
    return HistoryEvent(step, EventType.ACTIVITY_SCHEDULED, payload)


def test_a_recorded_step_the_body_never_took_is_still_found() -> None:
    ledger = DeterminismLedger()
    ledger.index([_scheduled(1), _scheduled(2), _scheduled(3)])
    ledger.claim(("activity", "unit.noop"))
    with pytest.raises(NonDeterminismError) as raised:
        ledger.check_all_reached()
    assert raised.value.step == 2
    ledger.claim(("activity", "unit.noop"))
    ledger.claim(("activity", "unit.noop"))
    ledger.check_all_reached()


def test_steps_taken_after_a_cold_replay_leave_nothing_to_check() -> None:
    """A warm body that replayed a long history cold checks, at each later task, only
    the recorded steps it has not taken: none once it caught up."""
    ledger = DeterminismLedger()
    ledger.index([_scheduled(step) for step in range(1, 5001)])
    for _ in range(5000):
        ledger.claim(("activity", "unit.noop"))
    ledger.check_all_reached()
    assert not ledger._unreached
