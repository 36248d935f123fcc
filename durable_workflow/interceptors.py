"""Interceptors: code that wraps what the client, a workflow and an activity do.

An interceptor is a class with methods that each take an *input* and ``next``,
the rest of the chain; a method that is not overridden passes the input on
unchanged. ``DURABLE_WORKFLOW["INTERCEPTORS"]`` lists them (dotted paths or
classes, instantiated once with no arguments); the first listed is the
outermost: it sees a call first and its result last.

Four places call through the chain:

* **client** (``ClientInterceptor``): ``WorkflowStub``'s start, signal,
  update, query, cancel, terminate, archive, signal-with-start and
  update-with-start, in the calling process; a schedule's fire goes through
  ``start_workflow`` too (``input.source == "schedule"``);
* **workflow inbound** (``WorkflowInboundInterceptor``): the run's
  ``handle()``, signal handlers, update handlers and queries, inside the
  replayed body;
* **workflow outbound** (``WorkflowOutboundInterceptor``): the body's
  activities, child workflows and timers, inside the replayed body;
* **activity inbound** (``ActivityInboundInterceptor``): each activity
  attempt's ``handle()``, in the worker running it.

Workflow interceptors run on every replay of the body, so they follow the
body's rules: no clock, randomness or I/O (the guards refuse them there too),
no state kept on ``self`` between runs (one instance serves every run); a side
effect goes through ``dw.side_effect`` or an activity. Headers set by an
outbound interceptor are recorded the first time; on replay the recorded ones
are used.

Inputs are mutable dataclasses: an interceptor may change them (add a header)
before calling ``next``. Pure Python: the engine imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from durable_workflow.exceptions import ConfigurationError
from durable_workflow.headers import Headers

if TYPE_CHECKING:
    from durable_workflow.info import ActivityInfo
    from durable_workflow.options import (
        ActivityOptions,
        ChildWorkflowOptions,
        LocalActivityOptions,
        StartOptions,
    )
    from durable_workflow.results import (
        CommandResult,
        SignalWithStartResult,
        StartResult,
        UpdateResult,
        UpdateWithStartResult,
    )

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741
Next = Callable[[I], O]


# ------------------------------------------------------------------ client inputs
@dataclass
class StartWorkflowInput:
    workflow_type: str
    instance_id: str
    #: Positional arguments of ``handle()`` (keyword arguments already moved).
    args: list[Any]
    options: StartOptions
    headers: Headers = field(default_factory=dict)
    #: Who starts the run: ``"client"`` (``WorkflowStub``) or ``"schedule"`` (a
    #: schedule's fire, in the process that fires it, inside its transaction).
    source: str = "client"
    #: For a schedule's fire: ``schedule_id``, ``trigger_number``, ``occurrence_time``,
    #: ... (as recorded in the run's ``ScheduleTriggered`` event); else ``None``.
    schedule: dict[str, Any] | None = None


@dataclass
class SignalWorkflowInput:
    workflow_type: str
    instance_id: str
    #: ``None``: the instance's current run.
    run_id: str | None
    name: str
    #: A positional list or a named map.
    args: list[Any] | dict[str, Any]
    request_id: str | None = None
    headers: Headers = field(default_factory=dict)


@dataclass
class UpdateWorkflowInput:
    workflow_type: str
    instance_id: str
    run_id: str | None
    name: str
    args: list[Any] | dict[str, Any]
    request_id: str | None = None
    headers: Headers = field(default_factory=dict)


@dataclass
class QueryWorkflowInput:
    workflow_type: str
    instance_id: str
    run_id: str | None
    name: str
    args: list[Any] | dict[str, Any]
    headers: Headers = field(default_factory=dict)


@dataclass
class SignalWithStartInput:
    """``signal_with_start``: one command that starts the run if needed and signals it.
    ``headers`` travel with both the start and the signal."""

    workflow_type: str
    instance_id: str
    name: str
    signal_args: list[Any]
    start_args: list[Any]
    options: StartOptions
    request_id: str | None = None
    headers: Headers = field(default_factory=dict)


@dataclass
class UpdateWithStartInput:
    """``update_with_start`` and its ``attempt_``/``submit_`` forms: the start and the
    update's submission (waiting for its outcome is outside the chain). ``headers``
    travel with both."""

    workflow_type: str
    instance_id: str
    name: str
    update_args: list[Any]
    start_args: list[Any]
    options: StartOptions
    request_id: str | None = None
    headers: Headers = field(default_factory=dict)


@dataclass
class CloseWorkflowInput:
    """A cancel, terminate or archive request (``kind``). An archive records no
    headers (it is bookkeeping on closed runs): ``headers`` is there to read."""

    kind: str
    workflow_type: str
    instance_id: str
    run_id: str | None
    reason: str | None
    request_id: str | None = None
    headers: Headers = field(default_factory=dict)


# --------------------------------------------------------- workflow inbound inputs
@dataclass
class HandleWorkflowInput:
    #: The workflow instance whose ``handle()`` is about to run.
    workflow: Any
    args: list[Any]
    #: The headers the run started with (recorded in ``WorkflowStarted``).
    headers: Headers = field(default_factory=dict)


@dataclass
class HandleSignalInput:
    workflow: Any
    name: str
    args: list[Any]
    #: The headers the signal was sent with (recorded in ``SignalReceived``).
    headers: Headers = field(default_factory=dict)


@dataclass
class HandleUpdateInput:
    workflow: Any
    name: str
    update_id: str
    args: list[Any]
    #: The headers the update was sent with (recorded in ``UpdateAccepted``).
    headers: Headers = field(default_factory=dict)


@dataclass
class HandleQueryInput:
    workflow: Any
    name: str
    args: list[Any]
    #: The headers the query was sent with (a query is never recorded).
    headers: Headers = field(default_factory=dict)


@dataclass
class ExecuteWorkflowTaskInput:
    """One workflow task in a worker: the body fed what it has not seen yet."""

    workflow_type: str
    instance_id: str
    run_id: str
    #: The workflow task's attempt (1 unless an earlier attempt failed or was lost).
    attempt: int
    #: Events fed to the body in this task, and how many of them an earlier task had
    #: already fed it (a cold replay re-feeds the whole history; a warm body none).
    events: int
    replayed_events: int
    #: The body was kept warm from the run's previous task (the sticky cache).
    sticky: bool
    #: The headers the run started with (``WorkflowStarted``).
    headers: Headers = field(default_factory=dict)


# -------------------------------------------------------- workflow outbound inputs
@dataclass
class ScheduleActivityInput:
    activity_type: str
    #: Positional arguments of the activity's ``handle()``.
    args: list[Any]
    #: ``LocalActivityOptions`` for a local activity (``local``).
    options: ActivityOptions | LocalActivityOptions | None
    #: Sent with the activity; its attempts see them (``ExecuteActivityInput.headers``).
    headers: Headers = field(default_factory=dict)
    #: ``dw.local_activity()``: it runs in the workflow task's process.
    local: bool = False


@dataclass
class StartChildInput:
    workflow_type: str
    args: list[Any]
    options: ChildWorkflowOptions | None
    #: The child run starts with them (its ``HandleWorkflowInput.headers``).
    headers: Headers = field(default_factory=dict)


@dataclass
class SignalExternalInput:
    """A signal the body sends to another workflow (a child's or an external handle's)."""

    instance_id: str
    #: ``None``: that instance's current run.
    run_id: str | None
    name: str
    args: list[Any]
    #: Sent with the signal: the receiving run's ``handle_signal`` sees them.
    headers: Headers = field(default_factory=dict)


@dataclass
class StartTimerInput:
    #: The delay, in seconds, as the body asked for it (already resolved).
    seconds: float


# --------------------------------------------------------- activity inbound input
@dataclass
class ExecuteActivityInput:
    #: The activity instance (``None`` when a test replaced the activity with a mock).
    activity: Any
    args: list[Any]
    info: ActivityInfo
    headers: Headers = field(default_factory=dict)


# ------------------------------------------------------------------- the classes
class ClientInterceptor:
    """Wraps ``WorkflowStub`` commands in the calling process."""

    def start_workflow(
        self, input: StartWorkflowInput, next: Next[Any, StartResult]
    ) -> StartResult:
        return next(input)

    def signal_workflow(
        self, input: SignalWorkflowInput, next: Next[Any, CommandResult]
    ) -> CommandResult:
        return next(input)

    def update_workflow(
        self, input: UpdateWorkflowInput, next: Next[Any, UpdateResult]
    ) -> UpdateResult:
        """Wraps submitting the update (waiting for its outcome is outside the chain)."""
        return next(input)

    def query_workflow(self, input: QueryWorkflowInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def cancel_workflow(
        self, input: CloseWorkflowInput, next: Next[Any, CommandResult]
    ) -> CommandResult:
        return next(input)

    def terminate_workflow(
        self, input: CloseWorkflowInput, next: Next[Any, CommandResult]
    ) -> CommandResult:
        return next(input)

    def archive_workflow(
        self, input: CloseWorkflowInput, next: Next[Any, CommandResult]
    ) -> CommandResult:
        """Wraps ``archive()``/``attempt_archive()``; the headers are not recorded."""
        return next(input)

    def signal_with_start_workflow(
        self, input: SignalWithStartInput, next: Next[Any, SignalWithStartResult]
    ) -> SignalWithStartResult:
        return next(input)

    def update_with_start_workflow(
        self, input: UpdateWithStartInput, next: Next[Any, UpdateWithStartResult]
    ) -> UpdateWithStartResult:
        """Wraps submitting the start and the update (waiting is outside the chain)."""
        return next(input)


class WorkflowInboundInterceptor:
    """Wraps what reaches a workflow body: ``handle()``, signals, updates, queries.
    Runs inside the replayed body (see the module docstring)."""

    def handle_workflow(self, input: HandleWorkflowInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def handle_signal(self, input: HandleSignalInput, next: Next[Any, None]) -> None:
        return next(input)

    def handle_update(self, input: HandleUpdateInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def handle_query(self, input: HandleQueryInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def execute_workflow_task(self, input: ExecuteWorkflowTaskInput, next: Next[Any, None]) -> None:
        """Wraps one workflow task in the worker, *outside* the body: called once per
        task, never replayed, so it may read the clock or do I/O (tracing does)."""
        return next(input)


class WorkflowOutboundInterceptor:
    """Wraps what a workflow body starts: activities, children, timers.
    Runs inside the replayed body (see the module docstring)."""

    def schedule_activity(self, input: ScheduleActivityInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def start_child(self, input: StartChildInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def start_timer(self, input: StartTimerInput, next: Next[Any, Any]) -> Any:
        return next(input)

    def signal_external(self, input: SignalExternalInput, next: Next[Any, Any]) -> Any:
        return next(input)


class ActivityInboundInterceptor:
    """Wraps each activity attempt's ``handle()`` in the worker running it."""

    def execute_activity(self, input: ExecuteActivityInput, next: Next[Any, Any]) -> Any:
        return next(input)


class Interceptor(
    ClientInterceptor,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
    ActivityInboundInterceptor,
):
    """All four kinds in one class: override the methods you need."""


# ------------------------------------------------------------------ the chain
_configured: tuple[object, ...] = ()


def configure(interceptors: Sequence[object]) -> None:
    """Use these interceptor instances from now on (the first is the outermost)."""
    global _configured
    _configured = tuple(interceptors)


def current() -> tuple[object, ...]:
    return _configured


def load(entries: Sequence[Any]) -> list[object]:
    """Instances of ``INTERCEPTORS`` entries: dotted paths, classes or instances."""
    if not isinstance(entries, list | tuple):
        raise ConfigurationError("DURABLE_WORKFLOW['INTERCEPTORS'] must be a list")
    loaded: list[object] = []
    for entry in entries:
        cls = _resolve(entry) if isinstance(entry, str) else entry
        instance = cls() if isinstance(cls, type) else cls
        if not isinstance(instance, _KINDS):
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['INTERCEPTORS']: {entry!r} is not an interceptor "
                "(subclass ClientInterceptor, WorkflowInboundInterceptor, "
                "WorkflowOutboundInterceptor, ActivityInboundInterceptor or Interceptor)"
            )
        loaded.append(instance)
    return loaded


def intercepted(method: str) -> bool:
    """Does any configured interceptor define ``method``?"""
    return any(getattr(interceptor, method, None) is not None for interceptor in _configured)


def call(method: str, input: I, innermost: Next[I, O]) -> O:
    """Run ``input`` through every configured interceptor's ``method``, then ``innermost``."""
    chained = innermost
    for interceptor in reversed(_configured):
        bound = getattr(interceptor, method, None)
        if bound is not None:
            chained = _link(bound, chained)
    return chained(input)


def _link(bound: Callable[[I, Next[I, O]], O], rest: Next[I, O]) -> Next[I, O]:
    return lambda input: bound(input, rest)


def _resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(
            f"DURABLE_WORKFLOW['INTERCEPTORS']: cannot import {path!r} ({exc})"
        ) from exc


_KINDS = (
    ClientInterceptor,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
    ActivityInboundInterceptor,
)
