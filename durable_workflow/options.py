"""Per-call and per-start options. Field names are the spec's, in snake_case."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from durable_workflow import text
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.headers import check_headers

DEFAULT_BACKOFF = (1, 2, 5, 10, 15, 30, 60, 120)

#: Priorities order the waiting work of one queue: lower runs first (as in DBOS and
#: Temporal), FIFO within a priority; the default sits in the middle so work can be
#: made more urgent or less.
PRIORITY_MIN, PRIORITY_MAX, DEFAULT_PRIORITY = 0, 9, 5


def check_priority(value: object, *, field: str = "priority") -> int | None:
    """A priority is caller input: ``None`` (the default) or an integer 0..9."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{field} must be an integer, got {value!r}")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise ConfigurationError(
            f"{field} must be between {PRIORITY_MIN} (first) and {PRIORITY_MAX} (last), got {value}"
        )
    return value


class DuplicateStartPolicy(StrEnum):
    REJECT_DUPLICATE = "reject_duplicate"
    RETURN_EXISTING_ACTIVE = "return_existing_active"


def _positive_or_none(name: str, value: int | None, minimum: int = 1) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


def normalize_backoff(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise ConfigurationError(f"backoff must be an int or a non-empty list of ints: {value!r}")
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or item < 0:
            raise ConfigurationError(f"backoff entries must be seconds >= 0: {value!r}")
        if item != int(item):
            raise ConfigurationError(f"backoff entries must be whole seconds: {value!r}")
        out.append(int(item))
    return out


@dataclass(frozen=True)
class ActivityOptions:
    """Per-call overrides for routing, retries and timeouts of one activity call."""

    connection: str | None = None
    queue: str | None = None
    max_attempts: int | None = None
    backoff: list[int] | int | None = None
    start_to_close_timeout: int | None = None
    schedule_to_start_timeout: int | None = None
    schedule_to_close_timeout: int | None = None
    heartbeat_timeout: int | None = None
    non_retryable_error_types: list[str] = field(default_factory=list)
    #: Orders this activity's attempts among the waiting work of a limited queue
    #: (0 first, 9 last; ``None``: the class's ``priority``, else 5).
    priority: int | None = None

    def __post_init__(self) -> None:
        _positive_or_none("max_attempts", self.max_attempts, minimum=0)
        check_priority(self.priority, field="ActivityOptions.priority")
        for name in (
            "start_to_close_timeout",
            "schedule_to_start_timeout",
            "schedule_to_close_timeout",
            "heartbeat_timeout",
        ):
            _positive_or_none(name, getattr(self, name))
        if self.backoff is not None:
            normalize_backoff(self.backoff)

    def snapshot(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StartOptions:
    """How a workflow starts; consumed by the engine, never passed to ``handle()``."""

    duplicate_start_policy: DuplicateStartPolicy = DuplicateStartPolicy.REJECT_DUPLICATE
    business_key: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    execution_timeout_seconds: int | None = None
    run_timeout_seconds: int | None = None
    #: At most one open run holds a given id; another start naming it is rejected.
    deduplication_id: str | None = None
    #: Headers the run starts with (``durable_workflow.headers``): workflow interceptors
    #: see them in ``handle_workflow`` and ``dw.info().headers`` on every replay.
    headers: dict[str, str] = field(default_factory=dict)
    #: The queue the run is routed to (default: the workflow class's ``queue``); a queue
    #: with ``workflow_concurrency`` in ``DURABLE_WORKFLOW["QUEUES"]`` keeps it waiting.
    queue: str | None = None
    #: Orders the runs waiting on such a queue: 0 first, 9 last (``None``: 5), first
    #: come first served within a priority (``check_priority``).
    priority: int | None = None
    #: The caller's id for this start: a start repeated with it (a retry after a lost
    #: answer) records nothing and returns the first start's outcome.
    request_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "duplicate_start_policy", DuplicateStartPolicy(self.duplicate_start_policy)
        )
        if self.request_id is not None:
            text.check(self.request_id, field="StartOptions.request_id", max_length=255)
        check_deduplication_id(self.deduplication_id)
        object.__setattr__(self, "queue", _name_or_none("queue", self.queue))
        check_priority(self.priority, field="StartOptions.priority")
        headers = check_headers(self.headers, field="StartOptions.headers")
        object.__setattr__(self, "headers", headers)
        for name, label in (
            ("execution_timeout_seconds", "execution"),
            ("run_timeout_seconds", "run"),
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigurationError(f"Workflow {label} timeout must be at least 1 second.")
        from durable_workflow.authoring import visibility

        visibility.check_memo(self.memo)
        visibility.check_search_attributes(self.search_attributes)
        visibility.check_labels(self.labels)
        visibility.check_business_key(self.business_key)

    @classmethod
    def reject_duplicate(cls) -> StartOptions:
        return cls(duplicate_start_policy=DuplicateStartPolicy.REJECT_DUPLICATE)

    @classmethod
    def return_existing_active(cls) -> StartOptions:
        return cls(duplicate_start_policy=DuplicateStartPolicy.RETURN_EXISTING_ACTIVE)

    def with_business_key(self, key: str | None) -> StartOptions:
        return dataclasses.replace(self, business_key=key)

    def with_labels(self, labels: dict[str, str]) -> StartOptions:
        return dataclasses.replace(self, labels=dict(labels))

    def with_memo(self, memo: dict[str, Any]) -> StartOptions:
        return dataclasses.replace(self, memo=dict(memo))

    def with_search_attributes(self, attributes: dict[str, Any]) -> StartOptions:
        return dataclasses.replace(self, search_attributes=dict(attributes))

    def with_headers(self, headers: dict[str, str]) -> StartOptions:
        """These options with ``headers`` laid over the ones they carry."""
        return dataclasses.replace(self, headers={**self.headers, **headers})

    def with_execution_timeout(self, seconds: int | None) -> StartOptions:
        return dataclasses.replace(self, execution_timeout_seconds=seconds)

    def with_run_timeout(self, seconds: int | None) -> StartOptions:
        return dataclasses.replace(self, run_timeout_seconds=seconds)

    def with_deduplication_id(self, deduplication_id: str | None) -> StartOptions:
        return dataclasses.replace(self, deduplication_id=deduplication_id)

    def with_queue(self, queue: str | None, *, priority: int | None = None) -> StartOptions:
        return dataclasses.replace(self, queue=queue, priority=priority)


DEDUPLICATION_ID_MAX_LENGTH = 191


def check_deduplication_id(value: object) -> None:
    """A de-duplication id is caller-supplied: a non-empty printable string, bounded."""
    if value is None:
        return
    if not isinstance(value, str) or not value or not value.isprintable():
        raise ConfigurationError(
            f"deduplication_id must be a non-empty printable string, got {value!r}"
        )
    if len(value) > DEDUPLICATION_ID_MAX_LENGTH:
        raise ConfigurationError(
            f"deduplication_id is {len(value)} characters long; "
            f"at most {DEDUPLICATION_ID_MAX_LENGTH} are allowed"
        )


class ParentClosePolicy(StrEnum):
    ABANDON = "abandon"
    REQUEST_CANCEL = "request_cancel"
    TERMINATE = "terminate"


@dataclass(frozen=True)
class ChildWorkflowOptions:
    """How a child workflow is named and routed, and what happens to it when the parent
    closes.

    ``instance_id`` names the child (validated like any instance id); by default it is
    derived from the parent run and the step (``{parent_run_id}:child:{step}``). The
    id must be free: a child cannot join a run it did not start, so an id already used
    by any workflow makes the start fail with ``WorkflowAlreadyStartedError``
    (``reject_duplicate``).
    """

    parent_close_policy: ParentClosePolicy = ParentClosePolicy.ABANDON
    queue: str | None = None
    connection: str | None = None
    instance_id: str | None = None
    #: Orders the child among the runs waiting on a queue that limits its runs
    #: (``StartOptions.priority``).
    priority: int | None = None

    def __post_init__(self) -> None:
        from durable_workflow.ids import validate_instance_id

        object.__setattr__(self, "parent_close_policy", ParentClosePolicy(self.parent_close_policy))
        if self.instance_id is not None:
            object.__setattr__(self, "instance_id", validate_instance_id(self.instance_id))
        check_priority(self.priority, field="ChildWorkflowOptions.priority")

    def snapshot(self) -> dict[str, Any]:
        snapshot: dict[str, Any] = {
            "parent_close_policy": str(self.parent_close_policy),
            "queue": self.queue,
            "connection": self.connection,
        }
        if self.instance_id is not None:
            snapshot["instance_id"] = self.instance_id
        if self.priority is not None:  # absent otherwise: older histories stay as they are
            snapshot["priority"] = self.priority
        return snapshot


def _name_or_none(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value.strip()) > 255
        or not value.isprintable()
    ):
        raise ConfigurationError(
            f"{name} must be a non-empty printable string of at most 255 characters"
        )
    return value.strip()


@dataclass(frozen=True)
class WorkerSessionOptions:
    """How a worker session is routed, leased and bounded (see ``dw.worker_session``).

    ``requirements`` are capability strings (``"gpu:nvidia-l4"``) every holder must
    have registered. The lease lapses after ``lease_seconds`` without a heartbeat;
    ``ttl_seconds`` after creation the session id is used up for good.
    """

    queue: str | None = None
    connection: str | None = None
    requirements: list[str] = field(default_factory=list)
    lease_seconds: int = 120
    ttl_seconds: int = 1800
    max_concurrent_activities: int = 1
    create_if_missing: bool = True
    allow_reacquire_after_failure: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "queue", _name_or_none("queue", self.queue))
        object.__setattr__(self, "connection", _name_or_none("connection", self.connection))
        if isinstance(self.requirements, str) or not isinstance(self.requirements, list | tuple):
            raise ConfigurationError("requirements must be a list of capability strings")
        cleaned = [_name_or_none("requirement", item) for item in self.requirements]
        if None in cleaned or len(set(cleaned)) != len(cleaned):
            raise ConfigurationError(f"requirements must be unique strings: {self.requirements!r}")
        object.__setattr__(self, "requirements", cleaned)
        for name in ("lease_seconds", "ttl_seconds", "max_concurrent_activities"):
            value = getattr(self, name)
            if value is None:
                raise ConfigurationError(f"{name} must be an integer >= 1, got None")
            _positive_or_none(name, value)
        for name in ("create_if_missing", "allow_reacquire_after_failure"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be True or False")

    def snapshot(self, session_id: str) -> dict[str, Any]:
        """The ``worker_session`` options document (defaults filled, no nulls)."""
        session_id = _name_or_none("session_id", session_id) or ""
        out: dict[str, Any] = {"session_id": session_id}
        if self.connection:
            out["connection"] = self.connection
        if self.queue:
            out["queue"] = self.queue
        out.update(
            requirements=list(self.requirements),
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.ttl_seconds,
            max_concurrent_activities=self.max_concurrent_activities,
            create_if_missing=self.create_if_missing,
            allow_reacquire_after_failure=self.allow_reacquire_after_failure,
        )
        return out


_LOCAL_REJECTED = (
    "Local activities do not accept connection, queue, worker session, or "
    "schedule-to-start routing options."
)


@dataclass(frozen=True)
class LocalActivityOptions:
    """Retry and timeout options for ``dw.local_activity`` (no routing: it runs in place)."""

    max_attempts: int | None = None
    backoff: list[int] | int | None = None
    start_to_close_timeout: int | None = None
    schedule_to_close_timeout: int | None = None
    heartbeat_timeout: int | None = None
    non_retryable_error_types: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _positive_or_none("max_attempts", self.max_attempts, minimum=0)
        for name in ("start_to_close_timeout", "schedule_to_close_timeout", "heartbeat_timeout"):
            _positive_or_none(name, getattr(self, name))
        if self.backoff is not None:
            normalize_backoff(self.backoff)

    @classmethod
    def from_activity_options(cls, options: ActivityOptions) -> LocalActivityOptions:
        if options.connection or options.queue or options.schedule_to_start_timeout:
            raise ConfigurationError(_LOCAL_REJECTED)
        return cls(
            max_attempts=options.max_attempts,
            backoff=options.backoff,
            start_to_close_timeout=options.start_to_close_timeout,
            schedule_to_close_timeout=options.schedule_to_close_timeout,
            heartbeat_timeout=options.heartbeat_timeout,
            non_retryable_error_types=list(options.non_retryable_error_types),
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "execution_mode": "local",
            "queue_bypassed": True,
            "routing": "same_process_workflow_task",
            **dataclasses.asdict(self),
        }
