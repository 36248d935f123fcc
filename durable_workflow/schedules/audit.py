"""The schedule audit stream: event names and the payload keys each one carries.

The keys are a wire contract, checked on every write: a payload with a missing
or an extra key is a programming error, not something to store.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from enum import StrEnum
from typing import Any


class ScheduleEventType(StrEnum):
    CREATED = "ScheduleCreated"
    PAUSED = "SchedulePaused"
    RESUMED = "ScheduleResumed"
    UPDATED = "ScheduleUpdated"
    TRIGGERED = "ScheduleTriggered"
    TRIGGER_SKIPPED = "ScheduleTriggerSkipped"
    DELETED = "ScheduleDeleted"


PAYLOAD_KEYS: dict[ScheduleEventType, frozenset[str]] = {
    ScheduleEventType.CREATED: frozenset({"spec", "action", "overlap_policy", "next_fire_at"}),
    ScheduleEventType.PAUSED: frozenset({"reason", "paused_at"}),
    ScheduleEventType.RESUMED: frozenset({"next_fire_at"}),
    ScheduleEventType.UPDATED: frozenset(
        {"changed_fields", "spec", "action", "overlap_policy", "next_fire_at"}
    ),
    ScheduleEventType.TRIGGERED: frozenset(
        {
            "workflow_instance_id",
            "workflow_run_id",
            "outcome",
            "effective_overlap_policy",
            "trigger_number",
            "occurrence_time",
        }
    ),
    ScheduleEventType.TRIGGER_SKIPPED: frozenset(
        {"reason", "skipped_trigger_count", "last_skipped_at"}
    ),
    ScheduleEventType.DELETED: frozenset({"reason", "deleted_at"}),
}


@dataclasses.dataclass(frozen=True)
class CommandContext:
    """Who asked for a schedule change, and why; recorded on the audit event."""

    principal: str | None = None
    request_id: str | None = None
    source: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def timestamp(moment: dt.datetime | None) -> str | None:
    """The wire form of an instant: UTC, microseconds, ``Z``."""
    if moment is None:
        return None
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_payload(
    event_type: ScheduleEventType, fields: dict[str, Any], context: CommandContext | None
) -> dict[str, Any]:
    expected = PAYLOAD_KEYS[event_type]
    if set(fields) != expected:
        raise AssertionError(
            f"{event_type} payload keys {sorted(fields)} "
            f"differ from the contract {sorted(expected)}"
        )
    payload = dict(fields)
    if context is not None and context.as_dict():
        payload["command_context"] = context.as_dict()
    return payload
