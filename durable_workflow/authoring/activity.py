"""The ``Activity`` base class: ordinary Python that may do I/O and may fail."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Generic

from durable_workflow import registry
from durable_workflow.authoring.protocols import HandleP, HandleR
from durable_workflow.exceptions import ActivityCancelled, NotInActivityError
from durable_workflow.info import ActivityInfo
from durable_workflow.options import (
    DEFAULT_BACKOFF,
    ActivityOptions,
    check_priority,
    normalize_backoff,
)


@dataclass(frozen=True)
class ActivityContext:
    """What a running activity attempt knows about itself."""

    workflow_id: str
    run_id: str
    activity_id: str
    attempt_id: str | None
    attempt_count: int
    heartbeat: Callable[[Any], bool]
    info: ActivityInfo | None = None
    #: The awaitable heartbeat of an async attempt on a worker's event loop (``None``:
    #: the synchronous one, run through ``sync_to_async``).
    aheartbeat: Callable[[Any], Awaitable[bool]] | None = None


#: The attempt running in this thread (activities run in worker threads, not greenlets).
_running: contextvars.ContextVar[ActivityContext | None] = contextvars.ContextVar(
    "durable_workflow_activity", default=None
)


@contextlib.contextmanager
def running(context: ActivityContext) -> Iterator[None]:
    """Make ``context`` the current attempt while its ``handle()`` runs."""
    token = _running.set(context)
    try:
        yield
    finally:
        _running.reset(token)


def activity_info() -> ActivityInfo:
    """The running activity attempt: ids, attempt, times, the previous attempt's last
    heartbeat, the owning workflow and the task token (for async completion)."""
    context = _running.get()
    if context is None or context.info is None:
        raise NotInActivityError("activity_info() only works while an activity is running")
    return context.info


class Activity(Generic[HandleP, HandleR]):
    """Subclass and implement ``handle()``; run with ``dw.activity(MyActivity, ...)``.

    Type checkers read ``handle()``'s signature: ``dw.activity(MyActivity, ...)``
    checks its arguments and gives its return type. ``Activity[[str, int], str]``
    states the signature explicitly, when you want it checked against ``handle()``.
    """

    #: Durable type key stored in history; set it explicitly.
    type_key: ClassVar[str | None] = None
    #: Celery queue and named connection (see ``DURABLE_WORKFLOW["CONNECTIONS"]``).
    queue: ClassVar[str | None] = None
    connection: ClassVar[str | None] = None
    #: Total attempts; 1 = no retry, 0 = retry until a timeout stops it.
    tries: ClassVar[int] = 1
    #: Order among the waiting work of a limited queue: 0 first, 9 last (default 5).
    priority: ClassVar[int | None] = None
    #: Set on intermediate base classes that should not be registered.
    abstract: ClassVar[bool] = True

    _dw_context: ActivityContext | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_priority(cls.__dict__.get("priority"), field=f"{cls.__name__}.priority")
        if not cls.__dict__.get("abstract", False):
            registry.register_activity(cls)

    def handle(self, *args: HandleP.args, **kwargs: HandleP.kwargs) -> HandleR:
        raise NotImplementedError(f"{type(self).__name__} must implement handle()")

    def backoff(self) -> list[int] | int:
        """Seconds to wait before each retry; the last entry repeats."""
        return list(DEFAULT_BACKOFF)

    # ------------------------------------------------------------ context
    def _context(self) -> ActivityContext:
        if self._dw_context is None:
            raise NotInActivityError("this method only works while the activity is running")
        return self._dw_context

    def activity_id(self) -> str:
        """Stable across retries: use it as the idempotency key of side effects."""
        return self._context().activity_id

    def attempt_id(self) -> str | None:
        return self._context().attempt_id

    def attempt_count(self) -> int:
        return self._context().attempt_count

    def workflow_id(self) -> str:
        return self._context().workflow_id

    def run_id(self) -> str:
        return self._context().run_id

    def info(self) -> ActivityInfo:
        """``dw.activity_info()`` for this attempt."""
        info = self._context().info
        if info is None:
            raise NotInActivityError("this method only works while the activity is running")
        return info

    def task_token(self) -> str:
        """The opaque token that completes this attempt from elsewhere (see
        ``CompleteAsync``); local activities have none."""
        token = self.info().task_token
        if token is None:
            raise NotInActivityError("a local activity cannot complete asynchronously")
        return token

    def heartbeat(self, details: Any = None) -> bool:
        """Tell the engine this attempt is alive and renew its lease.

        Returns False when the attempt has lost its lease (another attempt owns
        the work now). Raises ``ActivityCancelled`` when the workflow was
        cancelled or closed: let it propagate to stop the activity.
        """
        return bool(self._context().heartbeat(details))

    async def aheartbeat(self, details: Any = None) -> bool:
        """``heartbeat()`` for an ``async def handle()``: await it.

        Returns False when the attempt has lost its lease. When the workflow was
        cancelled or closed, the coroutine is cancelled: ``asyncio.CancelledError``
        is raised here (let it propagate, after any clean-up).
        """
        context = self._context()
        if context.aheartbeat is not None:
            return await context.aheartbeat(details)
        import asyncio

        from asgiref.sync import sync_to_async

        try:
            return bool(await sync_to_async(context.heartbeat)(details))
        except ActivityCancelled as exc:
            task = asyncio.current_task()
            if task is None:
                raise
            task.cancel(str(exc))  # delivered as CancelledError at the next await
            await asyncio.sleep(0)
            raise  # not reached: the sleep raised CancelledError


def is_async(cls: type | None) -> bool:
    """Is ``cls.handle`` an ``async def``?"""
    return cls is not None and inspect.iscoroutinefunction(getattr(cls, "handle", None))


def retry_policy(
    cls: type[Activity[..., Any]] | None, options: ActivityOptions | None
) -> dict[str, Any]:
    """The options snapshot stored on the execution when it is scheduled."""
    opts = options or ActivityOptions()
    snapshot = opts.snapshot()
    if cls is not None:
        if snapshot["max_attempts"] is None:
            snapshot["max_attempts"] = int(cls.tries)
        if snapshot["backoff"] is None:
            snapshot["backoff"] = cls.__new__(cls).backoff()
    if snapshot["max_attempts"] is None:
        snapshot["max_attempts"] = 1
    if snapshot["priority"] is None:
        snapshot["priority"] = getattr(cls, "priority", None)
    if snapshot["priority"] is None:
        del snapshot["priority"]  # the default: snapshots stay as they were before priorities
    snapshot["backoff"] = normalize_backoff(
        snapshot["backoff"] if snapshot["backoff"] is not None else list(DEFAULT_BACKOFF)
    )
    snapshot["non_retryable_error_types"] = list(snapshot["non_retryable_error_types"])
    return snapshot
