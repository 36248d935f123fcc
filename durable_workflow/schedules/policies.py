"""Overlap policies, statuses, skip reasons and tick outcomes (durable wire strings)."""

from __future__ import annotations

from durable_workflow.models.schedules import ScheduleOverlapPolicy, ScheduleStatus

__all__ = [
    "BUFFER_POLICIES",
    "DELETE_REASON_EXPLICIT",
    "DELETE_REASON_MAX_RUNS",
    "Outcome",
    "ScheduleOverlapPolicy",
    "ScheduleStatus",
    "SkipReason",
    "backfill_policy",
]

BUFFER_POLICIES = frozenset({ScheduleOverlapPolicy.BUFFER_ONE, ScheduleOverlapPolicy.BUFFER_ALL})

DELETE_REASON_MAX_RUNS = "max_runs_exhausted"
DELETE_REASON_EXPLICIT = "deleted"


class SkipReason:
    OVERLAP_POLICY_SKIP = "overlap_policy_skip"
    STATUS_NOT_TRIGGERABLE = "status_not_triggerable"
    REMAINING_ACTIONS_EXHAUSTED = "remaining_actions_exhausted"
    #: The slot's deterministic instance id already has a run (e.g. a re-created schedule).
    INSTANCE_ALREADY_STARTED = "instance_already_started"


class Outcome:
    """The ``outcome`` of a tick, trigger or backfill row."""

    TRIGGERED = "triggered"
    #: A buffered occurrence started because the run before it closed.
    BUFFER_DRAINED = "buffer_drained"
    BUFFERED = "buffered"
    SKIPPED = "skipped"
    #: Another ticker (or an earlier backfill) already claimed this fire slot.
    ALREADY_FIRED = "already_fired"
    #: Evaluating this schedule raised; nothing was written and it is retried next tick.
    FAILED = "failed"


def backfill_policy(
    policy: ScheduleOverlapPolicy, override: ScheduleOverlapPolicy | None
) -> ScheduleOverlapPolicy:
    """Backfill has nothing to drain a buffer later, so buffering becomes ``allow_all``."""
    if override is not None:
        return ScheduleOverlapPolicy(override)
    if policy in BUFFER_POLICIES:
        return ScheduleOverlapPolicy.ALLOW_ALL
    return ScheduleOverlapPolicy(policy)
