"""The durable steps a body can take: activities, timers, side effects, waits, children.

Mixed into ``WorkflowRuntime``; every method here runs on a body greenlet.

Each operation is built as a ``Call`` first. Called directly, the call starts
at once (claims the next step, records its command) and the body waits for
it. Inside ``all()`` / ``select()`` member callables the runtime is in *collect*
mode: the call is returned instead, and the group starts every member's call
at consecutive steps before it suspends once for the whole group.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from durable_workflow.engine.commands import (
    OpenConditionWait,
    OpenSignalWait,
    RecordSideEffect,
    ScheduleActivity,
    SignalChild,
    StartChild,
    StartTimer,
    UpsertVisibility,
)
from durable_workflow.exceptions import DurableWorkflowError, NonDeterminismError

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import Future, WorkflowRuntime

_CONDITION_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")

Meta = dict[str, Any] | None


class InvalidConditionKeyError(DurableWorkflowError, ValueError):
    """A condition wait key is not a URL-safe label of 1 to 128 characters."""


def validate_condition_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not _CONDITION_KEY.fullmatch(key.strip()):
        raise InvalidConditionKeyError(
            "condition wait keys must be 1 to 128 characters of letters, digits, "
            f"'.', '_', '-' or ':'; got {key!r}"
        )
    return key.strip()


def fingerprint(predicate: Callable[[], Any]) -> str:
    """A stable label for a predicate: where it is defined, not what it compiles to."""
    name = f"{getattr(predicate, '__module__', '')}.{getattr(predicate, '__qualname__', '')}"
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()[:16]


def child_instance_id(run_id: object, step: int) -> str:
    """A child's instance id: deterministic, and unique to the parent run and step."""
    return f"{run_id}:child:{step}"


@dataclass(frozen=True)
class LocalRequest:
    """A local activity attempt the executor must run before the body can go on."""

    step: int
    attempt_number: int
    retry_reason: str | None


@dataclass
class Call:
    """One durable operation, described before it starts."""

    kind: str  # activity | timer | signal | condition | child
    name: str | None
    start: Callable[[Meta], Future]
    future: Future | None = None

    @property
    def identity(self) -> str:
        step = self.future.step if self.future else 0
        return f"{self.kind}:{step}"


@dataclass
class Group:
    """A nested ``all()`` collected inside another group."""

    members: list[Call | Group] = field(default_factory=list)

    def leaves(self) -> list[Call]:
        out: list[Call] = []
        for member in self.members:
            out.extend(member.leaves() if isinstance(member, Group) else [member])
        return out


class StepsMixin:
    # ------------------------------------------------------------ plumbing
    def _run_call(self: WorkflowRuntime, call: Call) -> Any:
        """Start a call now and wait for it, or hand it to the group collecting it."""
        if self._collecting:
            self._collected += 1
            return call
        future = call.start(None)
        return self._wait(future.step, future)

    # ----------------------------------------------------------- operations
    def schedule_activity(
        self: WorkflowRuntime,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        routing: Callable[[], tuple[dict[str, Any], str | None, str | None]],
    ) -> Any:
        """``routing()`` gives (options snapshot, queue, connection); called for new steps only."""

        def start(meta: Meta) -> Future:
            step, recorded = self._next_step(("activity", activity_type))
            future = self._new_future(step)
            if recorded is None:
                if meta is None:
                    self._check_pending("pending_activity_count", 1)
                options, queue, connection = routing()
                self._issue(
                    ScheduleActivity(
                        step=step,
                        activity_type=activity_type,
                        activity_class=activity_class,
                        arguments=self._encode(arguments),
                        options=options,
                        queue=queue,
                        connection=connection,
                        group=meta,
                    ),
                    recorded,
                )
            self._open_activities.add(step)
            return future

        return self._run_call(Call("activity", activity_type, start))

    def schedule_local_activity(
        self: WorkflowRuntime,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        options: dict[str, Any],
    ) -> Any:
        """A local activity: the executor runs it in this process between transactions."""
        if self._collecting:
            raise TypeError("local_activity() cannot be a member of all() or select()")
        step, recorded = self._next_step(("local_activity", activity_type))
        future = self._new_future(step)
        outcome = self._local_outcomes.get(step)
        if outcome is not None:
            self._resolve_local(future, outcome)
        else:
            if recorded is None:
                self._check_pending("pending_activity_count", 1)
                self._issue(
                    ScheduleActivity(
                        step=step,
                        activity_type=activity_type,
                        activity_class=activity_class,
                        arguments=self._encode(arguments),
                        options=options,
                    ),
                    recorded,
                )
            started = self._local_started.get(step, 0)
            retried = self._local_retried.get(step)
            if retried is not None and retried[0] >= started:
                reason = retried[1]
            else:
                reason = "cold_replay" if started else None
            if not self._query_mode:
                self.local_requests.append(
                    LocalRequest(step=step, attempt_number=started + 1, retry_reason=reason)
                )
        return self._wait(step, future)

    def start_child(
        self: WorkflowRuntime,
        *,
        workflow_type: str,
        workflow_class: str,
        arguments: list[Any],
        options: dict[str, Any],
    ) -> Any:
        def start(meta: Meta) -> Future:
            step, recorded = self._next_step(("child", workflow_type))
            future = self._new_future(step)
            if recorded is None:
                if meta is None:
                    self._check_pending("pending_child_count", 1)
                self._issue(
                    StartChild(
                        step=step,
                        workflow_type=workflow_type,
                        workflow_class=workflow_class,
                        arguments=self._encode(arguments),
                        options=options,
                        group=meta,
                    ),
                    recorded,
                )
            self._children.append(step)
            return future

        return self._run_call(Call("child", workflow_type, start))

    def timer(self: WorkflowRuntime, seconds: int) -> None:
        def start(meta: Meta) -> Future:
            step, recorded = self._next_step(("timer", None))
            future = self._new_future(step)
            if recorded is None and seconds:
                self._check_pending("pending_timer_count", 1)
            self._issue(StartTimer(step=step, delay_seconds=seconds, group=meta), recorded)
            self._open_timers.append(step)
            delay = seconds if recorded is None else int(recorded.payload.get("delay_seconds", -1))
            if delay == 0:
                self._resolve(future)
            return future

        return self._run_call(Call("timer", None, start))  # type: ignore[no-any-return]

    def signal_child(self: WorkflowRuntime, instance_id: str, name: str, args: list[Any]) -> None:
        """Send a signal to a child, once: replay finds the step already recorded."""
        if self._collecting:
            raise TypeError("signalling a child cannot be a member of all() or select()")
        step, recorded = self._next_step(("side_effect", None))
        self._issue(
            SignalChild(
                step=step, instance_id=instance_id, signal_name=name, arguments=self._encode(args)
            ),
            recorded,
        )

    def upsert_visibility(self: WorkflowRuntime, kind: str, entries: dict[str, Any]) -> None:
        """Record a memo or search-attribute upsert once; replay finds it recorded."""
        if self._collecting:
            raise TypeError(f"upserting {kind} cannot be a member of all() or select()")
        step, recorded = self._next_step((kind, None))
        self._issue(UpsertVisibility(step=step, kind=kind, entries=dict(entries)), recorded)

    def side_effect(self: WorkflowRuntime, fn: Callable[[], Any]) -> Any:
        if self._collecting:
            raise TypeError("side_effect() cannot be a member of all() or select()")
        step, recorded = self._next_step(("side_effect", None))
        if recorded is not None:
            return self._decode(recorded.payload.get("result"))
        value = fn()
        self._issue(RecordSideEffect(step=step, result=self._encode(value)), recorded)
        return value

    def wait_signal(self: WorkflowRuntime, name: str, timeout: int | None) -> Any:
        """The next signal called ``name`` (its payload), or ``None`` if the timeout wins."""

        def start(meta: Meta) -> Future:
            step, recorded = self._next_step(("signal", name))
            future = self._new_future(step)
            self._issue(
                OpenSignalWait(step=step, signal_name=name, timeout_seconds=timeout), recorded
            )
            self._wait_kind[step] = ("signal", name)
            buffered = self._signal_buffer.get(name)
            if buffered:
                signal_id, value = buffered.popleft()
                self._resolve(future, value=value)
                self._signal_consumed(step, signal_id, name)
            elif timeout == 0:
                self._issue(StartTimer(step, 0, kind="signal_timeout"), recorded)
                self._resolve(future, value=None)
            else:
                if timeout:
                    self._issue(StartTimer(step, timeout, kind="signal_timeout"), recorded)
                    self._timeout_pending.add(step)
                self._signal_waits.setdefault(name, []).append(step)
            return future

        return self._run_call(Call("signal", name, start))

    def wait_condition(
        self: WorkflowRuntime,
        predicate: Callable[[], Any],
        timeout: int | None,
        key: str | None,
    ) -> bool:
        """True once ``predicate()`` holds; False if the timeout wins first."""
        key = validate_condition_key(key)
        label = fingerprint(predicate)

        def start(meta: Meta) -> Future:
            step, recorded = self._next_step(("condition", key))
            recorded_label = (
                recorded.payload.get("condition_definition_fingerprint") if recorded else None
            )
            if recorded_label not in (None, label):
                self.fail_fatally(
                    NonDeterminismError(
                        step,
                        f"ConditionWaitOpened({recorded_label})",
                        f"ConditionWaitOpened({label})",
                        "the wait's predicate is a different function",
                    )
                )
            future = self._new_future(step)
            self._issue(
                OpenConditionWait(
                    step=step, condition_key=key, fingerprint=label, timeout_seconds=timeout
                ),
                recorded,
            )
            self._wait_kind[step] = ("condition", key)
            if self._evaluate(step, future, predicate):
                pass
            elif timeout == 0:
                self._issue(StartTimer(step, 0, kind="condition_timeout"), recorded)
                self._resolve_condition(step, future, satisfied=False)
            else:
                if timeout:
                    self._issue(StartTimer(step, timeout, kind="condition_timeout"), recorded)
                    self._timeout_pending.add(step)
                self._conditions[step] = predicate
            return future

        result = self._run_call(Call("condition", key, start))
        return result if isinstance(result, Call) else bool(result)
