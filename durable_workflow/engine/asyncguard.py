"""Refusing ``async`` workflow code: bodies and handlers are synchronous greenlets.

A body suspends by switching its greenlet back to the engine; replay resumes it by
feeding recorded outcomes in the recorded order. An event loop inside a body would
schedule its own callbacks, in an order history does not hold, and a greenlet
switch from under a running loop would carry that loop's state away with it. So an
``async def`` body or handler is refused when its class is defined, and a durable
helper called from a coroutine, or while an event loop runs, fails with this error.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from durable_workflow.exceptions import AsyncWorkflowCodeError

_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE

ADVICE = (
    "workflow bodies run on synchronous greenlets so that replay is deterministic; "
    "call durable helpers from plain `def` code and do async I/O in an activity "
    "(an Activity's handle() may be `async def`)"
)


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` (unwrapped) is an ``async def`` function or async generator."""
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


def refuse_async_methods(methods: Iterable[tuple[str, Callable[..., Any] | None]]) -> None:
    """``AsyncWorkflowCodeError`` for the first ``(what, function)`` that is async."""
    for what, fn in methods:
        if fn is not None and is_async(fn):
            raise AsyncWorkflowCodeError(f"{what} is `async def`; {ADVICE}")


def refuse_async_caller(what: str) -> None:
    """Refuse a durable operation asked from a coroutine or under a running event loop."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_flags & _ASYNC_CODE:
                raise AsyncWorkflowCodeError(
                    f"{what} was called from `async def {frame.f_code.co_name}` "
                    f"inside a workflow; {ADVICE}"
                )
            frame = frame.f_back
    finally:
        del frame
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise AsyncWorkflowCodeError(f"{what} was called while an event loop runs; {ADVICE}")


def refuse_awaitable(result: Any) -> None:
    """A body that handed back an awaitable (an ``async`` handle in disguise)."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # never awaited, on purpose: no "never awaited" warning
        raise AsyncWorkflowCodeError(f"handle() returned an awaitable ({result!r}); {ADVICE}")
