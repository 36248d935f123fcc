"""What ``WorkflowStub.describe()`` returns: a run, what it waits on, why it is parked.

Plain frozen values read from committed rows (no replay); a description is a
snapshot, call ``describe()`` again for a fresh one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt


@dataclasses.dataclass(frozen=True)
class TimerWait:
    """A durable timer (``dw.timer``) that has not fired yet."""

    sequence: int
    fire_at: dt.datetime
    kind: str = "timer"


@dataclasses.dataclass(frozen=True)
class SignalWait:
    """``dw.wait_signal(name)`` not answered yet; ``timeout_at`` when it has a timeout."""

    sequence: int
    signal_name: str
    timeout_at: dt.datetime | None = None
    kind: str = "signal"


@dataclasses.dataclass(frozen=True)
class ConditionWait:
    """A condition wait (``dw.wait``) whose predicate has not held yet."""

    sequence: int
    condition_key: str | None
    timeout_at: dt.datetime | None = None
    kind: str = "condition"


@dataclasses.dataclass(frozen=True)
class ActivityWait:
    """An activity not finished: ``attempt`` is its current (or last) attempt number,
    ``next_attempt_at`` when a retry waits for its back-off, ``waiting_for_queue`` when
    its attempt waits for a free slot on a limited queue."""

    sequence: int
    activity_type: str
    activity_execution_id: str
    status: str
    attempt: int
    next_attempt_at: dt.datetime | None = None
    kind: str = "activity"
    #: The limited work queue whose capacity its next attempt waits for, if any.
    waiting_for_queue: str | None = None
    #: Which of that queue's limits holds it: ``concurrency``, ``rate`` or
    #: ``worker_concurrency`` (``None`` when it does not wait for a queue).
    waiting_reason: str | None = None

    @property
    def summary(self) -> str:
        """One line for people: ``waiting for capacity on queue "stripe"`` when it waits
        (with ``(rate limit)`` or ``(per-worker limit)`` when that is what holds it)."""
        if self.waiting_for_queue is not None:
            from durable_workflow.queue_limits import waiting_words

            return waiting_words(self.waiting_for_queue, self.waiting_reason)
        return f"activity {self.activity_type} attempt {max(self.attempt, 1)} ({self.status})"


@dataclasses.dataclass(frozen=True)
class ChildWait:
    """A child workflow the run started and that has not closed yet."""

    sequence: int
    child_instance_id: str
    child_workflow_type: str
    child_run_id: str | None
    kind: str = "child"


@dataclasses.dataclass(frozen=True)
class UpdateWait:
    """An accepted update that the run has not completed yet."""

    update_id: str
    update_name: str
    accepted_at: dt.datetime
    kind: str = "update"


@dataclasses.dataclass(frozen=True)
class QueueSlotWait:
    """The run has not started: its queue limits its runs (``workflow_concurrency``) and
    no slot is free for it yet. Always first, before anything the body opened."""

    queue: str
    sequence: int = 0
    kind: str = "queue_slot"

    @property
    def summary(self) -> str:
        return f'waiting for a slot on workflow queue "{self.queue}"'


Wait = (
    TimerWait | SignalWait | ConditionWait | ActivityWait | ChildWait | UpdateWait | QueueSlotWait
)


@dataclasses.dataclass(frozen=True)
class TaskFailure:
    """Why a run is parked: its last workflow task failed and nothing will retry it until
    the code is fixed and the run repaired (``WorkflowStub.repair()``)."""

    exception_type: str
    exception_class: str
    message: str
    traceback: str
    since: dt.datetime
    task_id: str
    failure_id: str | None
    #: Attempts of that workflow task that ended without an outcome (failed or crashed).
    attempts: int


@dataclasses.dataclass(frozen=True)
class WorkflowDescription:
    """One run as the database holds it now."""

    instance_id: str
    workflow_type: str
    run_id: str | None
    run_number: int | None
    status: str
    closed_reason: str | None
    #: Everything open the run waits on, in step order (updates last).
    waiting_on: tuple[Wait, ...] = ()
    #: Set when the run is parked on a failed workflow task.
    task_failure: TaskFailure | None = None
    #: The namespace the instance belongs to.
    namespace: str = "default"

    @property
    def parked(self) -> bool:
        return self.task_failure is not None

    @property
    def waiting_for_queue(self) -> str | None:
        """The queue whose free slot the run waits for before it starts, if any."""
        for wait in self.waiting_on:
            if isinstance(wait, QueueSlotWait):
                return wait.queue
        return None
