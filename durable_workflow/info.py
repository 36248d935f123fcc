"""What a running workflow or activity knows about itself: ``dw.info()``, ``dw.activity_info()``.

Both are frozen values; their mappings are read-only views. Inside a workflow
every field is taken from history as far as the body has got, so it is the same
on every replay, except ``task_attempt`` (which workflow task attempt is
running this code: for logs, never for decisions).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def frozen_mapping(values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy (the caller's dict may change afterwards)."""
    return MappingProxyType(dict(values or {}))


@dataclasses.dataclass(frozen=True)
class WorkflowInfo:
    """The running workflow, as of the point of history the body has reached."""

    instance_id: str
    run_id: str
    #: 1 for the first run of the instance, then one more per continue-as-new.
    run_number: int
    workflow_type: str
    #: The instance and run of the parent, for a child workflow.
    parent_instance_id: str | None
    parent_run_id: str | None
    #: The run this one continues, after a continue-as-new.
    continued_from_run_id: str | None
    #: When the run started (its ``WorkflowStarted`` event).
    started_at: dt.datetime | None
    #: Attempt of the workflow task running this code (1 the first time). It differs
    #: between an execution and its replays: log it, never branch on it.
    task_attempt: int
    #: Events and payload bytes of history up to the event being processed.
    history_length: int
    history_size: int
    #: The queue the run's workflow tasks go to.
    queue: str | None
    #: Memo and search attributes: those the run started with, merged with the body's
    #: upserts so far.
    memo: Mapping[str, Any]
    search_attributes: Mapping[str, Any]
    #: The headers the run started with (``StartOptions.headers``, a client or parent
    #: interceptor's), the same on every replay.
    headers: Mapping[str, str] = dataclasses.field(default_factory=lambda: frozen_mapping({}))


@dataclasses.dataclass(frozen=True)
class ActivityInfo:
    """The running activity attempt."""

    #: The execution id: stable across retries, the default idempotency key.
    activity_id: str
    activity_type: str
    #: 1 on the first attempt, 2 on the first retry, ...
    attempt: int
    attempt_id: str
    scheduled_at: dt.datetime | None
    started_at: dt.datetime | None
    #: The last heartbeat progress recorded by an earlier attempt (``None`` without one),
    #: to resume where it stopped.
    heartbeat_details: Mapping[str, Any] | None
    heartbeat_timeout: int | None
    start_to_close_timeout: int | None
    #: The workflow the activity belongs to.
    workflow_instance_id: str
    workflow_run_id: str
    workflow_type: str
    queue: str | None
    #: Completes this attempt from elsewhere (``raise dw.CompleteAsync()`` first);
    #: ``None`` for a local activity.
    task_token: str | None
    local: bool = False
    #: The headers the workflow scheduled the activity with.
    headers: Mapping[str, str] = dataclasses.field(default_factory=lambda: frozen_mapping({}))
