"""What one workflow, activity or timer task came to: the answers of
``run_workflow_task``, ``run_activity_task`` and ``run_timer_task``.

A ``StrEnum``, so an outcome still compares equal to its name (``== "completed"``),
goes into a metric label or a Celery result as that name, and a new outcome is added
here, with its meaning, rather than as a bare string somewhere in the executor.
"""

from __future__ import annotations

import enum


class WorkflowTaskOutcome(enum.StrEnum):
    """What one workflow task came to: ``run_workflow_task``'s answer."""

    #: The body advanced: its new commands and events are recorded, the task settled.
    COMPLETED = "completed"
    #: Nothing to do: the task is no longer ready, another worker claimed it, or the run
    #: is closed (its task is cancelled then).
    SKIPPED = "skipped"
    #: The task failed and was parked (a task failure, or the attempt one too many).
    FAILED = "failed"
    #: The run's own deadline passed: the run is closed as timed out.
    TIMED_OUT = "timed_out"
    #: A local activity failed and retries in a later workflow task.
    RETRYING = "retrying"
    #: This worker does not support the run's compatibility marker: the task stays ready.
    INCOMPATIBLE = "incompatible"
    #: The run's sticky owner is live: the message went on to its direct queue.
    HELD = "held"
    #: Not due yet on this process's clock: the message is sent again for then.
    EARLY = "early"
    #: A local activity of the run runs under another task's lease: tried again in 1 s.
    BUSY = "busy"
    #: The lease of a task paused for a local activity was lost: another worker redoes it.
    STALE = "stale"
    #: The run waits for a slot on a queue that limits its runs: the task waits again,
    #: with no message, until a slot frees (``workflow_gate``).
    QUEUED = "queued"


class ActivityTaskOutcome(enum.StrEnum):
    """What one activity task came to: ``run_activity_task``'s answer."""

    #: The result is recorded.
    COMPLETED = "completed"
    #: The attempt failed and a retry is scheduled after its back-off.
    RETRYING = "retrying"
    #: The attempt failed for good: the activity failed (its workflow task is woken).
    FAILED = "failed"
    #: The run is being cancelled: the attempt ends cancelled.
    CANCELLED = "cancelled"
    #: The lease was lost or the run closed: what the attempt reported is ignored.
    STALE = "stale"
    #: Nothing to run: the task is no longer ready, taken, or waits for a queue slot.
    SKIPPED = "skipped"
    #: The activity completes later through its task token (``COMPLETES_LATER``).
    COMPLETES_LATER = "completes_later"
    #: An async attempt was started on this worker's event loop; it settles from there.
    STARTED = "started"
    #: The worker stopped before an async attempt found room: its lease was given back.
    HANDED_BACK = "handed back"


class TimerTaskOutcome(enum.StrEnum):
    """What one timer task came to: ``run_timer_task``'s answer."""

    #: The timer fired: ``TimerFired`` is recorded and the workflow woken.
    FIRED = "fired"
    #: Not due yet: the task is sent again for then.
    EARLY = "early"
    #: This worker does not support the run's compatibility marker: the task stays ready.
    INCOMPATIBLE = "incompatible"
    #: Nothing to do: the task or the timer is settled, or the run closed.
    SKIPPED = "skipped"
