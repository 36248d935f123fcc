"""The durable steps a body can take: activities, timers, side effects and waits.

Mixed into ``WorkflowRuntime``; every method here runs on a body greenlet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from durable_workflow.engine.commands import (
    OpenConditionWait,
    OpenSignalWait,
    RecordSideEffect,
    ScheduleActivity,
    StartTimer,
)
from durable_workflow.exceptions import DurableWorkflowError, NonDeterminismError

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import WorkflowRuntime

_CONDITION_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")


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


class StepsMixin:
    def schedule_activity(
        self: WorkflowRuntime,
        *,
        activity_type: str,
        activity_class: str,
        arguments: list[Any],
        options: dict[str, Any],
        queue: str | None,
        connection: str | None,
    ) -> Any:
        step, recorded = self._next_step(("activity", activity_type))
        future = self._new_future(step)
        if recorded is None:
            self._issue(
                ScheduleActivity(
                    step=step,
                    activity_type=activity_type,
                    activity_class=activity_class,
                    arguments=self._encode(arguments),
                    options=options,
                    queue=queue,
                    connection=connection,
                ),
                recorded,
            )
        return self._wait(step, future)

    def timer(self: WorkflowRuntime, seconds: int) -> None:
        step, recorded = self._next_step(("timer", None))
        future = self._new_future(step)
        self._issue(StartTimer(step=step, delay_seconds=seconds), recorded)
        delay = seconds if recorded is None else int(recorded.payload.get("delay_seconds", -1))
        if delay == 0:
            self._resolve(future)
        return self._wait(step, future)  # type: ignore[no-any-return]

    def side_effect(self: WorkflowRuntime, fn: Callable[[], Any]) -> Any:
        step, recorded = self._next_step(("side_effect", None))
        if recorded is not None:
            return self._decode(recorded.payload.get("result"))
        value = fn()
        self._issue(RecordSideEffect(step=step, result=self._encode(value)), recorded)
        return value

    def wait_signal(self: WorkflowRuntime, name: str, timeout: int | None) -> Any:
        """The next signal called ``name`` (its payload), or ``None`` if the timeout wins."""
        step, recorded = self._next_step(("signal", name))
        future = self._new_future(step)
        self._issue(OpenSignalWait(step=step, signal_name=name, timeout_seconds=timeout), recorded)
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
        return self._wait(step, future)

    def wait_condition(
        self: WorkflowRuntime,
        predicate: Callable[[], Any],
        timeout: int | None,
        key: str | None,
    ) -> bool:
        """True once ``predicate()`` holds; False if the timeout wins first."""
        key = validate_condition_key(key)
        step, recorded = self._next_step(("condition", key))
        print_ = fingerprint(predicate)
        if recorded is not None and recorded.payload.get(
            "condition_definition_fingerprint"
        ) not in (
            None,
            print_,
        ):
            self.fail_fatally(
                NonDeterminismError(
                    step,
                    f"ConditionWaitOpened({recorded.payload.get('condition_definition_fingerprint')})",
                    f"ConditionWaitOpened({print_})",
                    "the wait's predicate is a different function",
                )
            )
        future = self._new_future(step)
        self._issue(
            OpenConditionWait(
                step=step, condition_key=key, fingerprint=print_, timeout_seconds=timeout
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
        return bool(self._wait(step, future))
