"""Calling an activity's user code: its arguments decoded, its context set, its result encoded.

No transaction is open here and nothing is settled: the caller (``activity_task`` for a
leased attempt, ``async_attempts`` for one on the event loop, ``local_activities`` for
one inside a workflow task) takes what comes back to the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync

from durable_workflow import interceptors, observe, registry
from durable_workflow.authoring.activity import ActivityContext, running
from durable_workflow.converter import ACTIVITY, handle_signature, payloads
from durable_workflow.engine.failures import INTERRUPTS
from durable_workflow.exceptions import ActivityCancelled, CompleteAsync, NonRetryableError
from durable_workflow.executor import hooks, tokens
from durable_workflow.executor.attempts import Lease
from durable_workflow.headers import stored
from durable_workflow.info import ActivityInfo, frozen_mapping
from durable_workflow.store.records import ActivityRecord

#: What ``invoke_activity`` returns for an attempt that completes later, by its token.
COMPLETES_LATER = object()


@dataclasses.dataclass(frozen=True)
class Attempt:
    """Which attempt of which workflow's activity is about to run."""

    instance_id: str
    run_id: uuid.UUID
    workflow_type: str
    attempt_id: uuid.UUID
    attempt_number: int
    started_at: dt.datetime | None
    local: bool = False


def attempt_of(lease: Lease) -> Attempt:
    return Attempt(
        instance_id=lease.instance_id,
        run_id=lease.run_id,
        workflow_type=lease.workflow_type,
        attempt_id=lease.attempt_id,
        attempt_number=lease.attempt_number,
        started_at=lease.started_at,
    )


def attempt_info(execution: ActivityRecord, attempt: Attempt) -> ActivityInfo:
    """``dw.activity_info()`` for an attempt about to run."""
    options = execution.options
    progress = execution.last_heartbeat_progress
    return ActivityInfo(
        activity_id=str(execution.id),
        activity_type=execution.activity_type,
        attempt=attempt.attempt_number,
        attempt_id=str(attempt.attempt_id),
        scheduled_at=execution.scheduled_at,
        started_at=attempt.started_at,
        heartbeat_details=frozen_mapping(progress) if progress else None,
        heartbeat_timeout=options.get("heartbeat_timeout"),
        start_to_close_timeout=options.get("start_to_close_timeout"),
        workflow_instance_id=attempt.instance_id,
        workflow_run_id=str(attempt.run_id),
        workflow_type=attempt.workflow_type,
        queue=execution.queue,
        task_token=None if attempt.local else tokens.make(execution.id, attempt.attempt_id),
        local=attempt.local,
        headers=frozen_mapping(stored(options)),
    )


def invoke_activity(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Callable[[Any], bool],
) -> tuple[bool, Any]:
    """Run the user's ``handle()``; returns (True, result envelope) or (False, exception).

    An activity that raised ``CompleteAsync`` returns ``(True, COMPLETES_LATER)``: its
    outcome will come through its task token. An ``async def handle()`` runs to its end
    here (a worker's Celery task hands it to the process's event loop instead:
    ``activity_task.run_claimed``).
    """
    started = time.monotonic()
    ok, value = _invoke_handle(
        execution, attempt=attempt, payload_codec=payload_codec, heartbeat=heartbeat
    )
    outcome = "failed" if not ok else "async" if value is COMPLETES_LATER else "completed"
    observe.activity_attempt(execution, outcome, time.monotonic() - started)
    return ok, value


def _invoke_handle(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Callable[[Any], bool],
) -> tuple[bool, Any]:
    try:
        call, context = prepare_call(
            execution, attempt=attempt, payload_codec=payload_codec, heartbeat=heartbeat
        )
        with running(context):
            result = call()
            if inspect.isawaitable(result):
                result = run_to_end(result)
        return True, payloads.encode_value(result, payload_codec, "result")
    except CompleteAsync:
        if attempt.local:
            return False, NonRetryableError("a local activity cannot complete asynchronously")
        return True, COMPLETES_LATER
    except INTERRUPTS:
        raise  # the process is stopping: the caller hands the task back, uncounted
    except BaseException as exc:  # an activity failure is data, not a crash
        return False, exc


def _execute(
    execution: ActivityRecord, context: Any, input: interceptors.ExecuteActivityInput
) -> Any:
    """The innermost link of ``execute_activity``: the activity's ``handle()`` (or its mock)."""
    if input.activity is None:
        mock = hooks.activity_mocks[execution.activity_type]
        return mock(context, *input.args) if callable(mock) else mock
    return input.activity.handle(*input.args)


def prepare_call(
    execution: ActivityRecord,
    *,
    attempt: Attempt,
    payload_codec: str,
    heartbeat: Callable[[Any], bool],
    aheartbeat: Callable[[Any], Awaitable[bool]] | None = None,
) -> tuple[Callable[[], Any], ActivityContext]:
    """The user's ``handle()`` (or its mock) bound to its decoded arguments, and the
    context it runs in."""
    cls: Any = None
    mocked = execution.activity_type in hooks.activity_mocks
    if not mocked:
        cls = registry.activity_class(execution.activity_type)
    arguments = (
        payloads.decode_arguments(
            execution.arguments, handle_signature(cls), codec=payload_codec, receiver=ACTIVITY
        )
        or []
    )
    info = attempt_info(execution, attempt)
    context = ActivityContext(
        workflow_id=attempt.instance_id,
        run_id=str(attempt.run_id),
        activity_id=str(execution.id),
        attempt_id=str(attempt.attempt_id),
        attempt_count=attempt.attempt_number,
        heartbeat=heartbeat,
        info=info,
        aheartbeat=aheartbeat,
    )
    instance = None
    if not mocked:
        instance = cls()
        instance._dw_context = context
    executing = interceptors.ExecuteActivityInput(
        instance, list(arguments), info, dict(info.headers)
    )
    inner = functools.partial(_execute, execution, context)
    return functools.partial(interceptors.call, "execute_activity", executing, inner), context


def run_to_end(awaitable: Awaitable[Any]) -> Any:
    """Run an async ``handle()`` to its end in this thread (no worker loop: the testing
    kit, eager mode, a local activity). Django's async ORM inside it uses this thread's
    connection, as ``async_to_sync`` arranges."""

    async def main() -> Any:
        try:
            return await awaitable
        except asyncio.CancelledError as exc:  # ``aheartbeat()`` found the run cancelled
            raise ActivityCancelled(str(exc) or "the activity was cancelled") from None

    return async_to_sync(main)()
