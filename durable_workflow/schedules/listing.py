"""``ScheduleManager.list``'s arguments: statuses, the workflow filter, opaque cursors."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable

from durable_workflow.schedules.actions import resolve_workflow
from durable_workflow.schedules.errors import InvalidScheduleError
from durable_workflow.schedules.policies import ScheduleStatus

MAX_PAGE = 500
#: What a listing shows unless told otherwise: every schedule that still exists.
DEFAULT_STATUSES = (ScheduleStatus.ACTIVE, ScheduleStatus.PAUSED)


def statuses(status: ScheduleStatus | str | Iterable[ScheduleStatus | str] | None) -> list[str]:
    if status is None:
        return [str(s) for s in DEFAULT_STATUSES]
    wanted = [status] if isinstance(status, str) else list(status)
    try:
        return [str(ScheduleStatus(value)) for value in wanted]
    except ValueError:
        allowed = ", ".join(s.value for s in ScheduleStatus)
        raise InvalidScheduleError(f"status must be one of {allowed}: {status!r}") from None


def workflow_type(workflow: type | str) -> str:
    return str(resolve_workflow(workflow).type_key)


def make_cursor(schedule_id: str, ulid: uuid.UUID) -> str:
    raw = json.dumps([schedule_id, str(ulid)], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str | None) -> tuple[str, uuid.UUID] | None:
    """The keyset a cursor names; anything else is refused, never half-read."""
    if cursor is None:
        return None
    try:
        if not isinstance(cursor, str) or len(cursor) > 1024:
            raise ValueError(cursor)
        padded = cursor + "=" * (-len(cursor) % 4)
        schedule_id, ulid = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(schedule_id, str):
            raise ValueError(schedule_id)
        return schedule_id, uuid.UUID(str(ulid))
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise InvalidScheduleError(f"not a cursor from ScheduleManager.list: {cursor!r}") from None
