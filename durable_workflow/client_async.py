"""Awaitable twins of the client's I/O methods, for ASGI views and other async code.

``await stub.astart(...)`` is ``stub.start(...)``: there is one implementation of each
command and read, the synchronous one, and its twin runs it through
``asgiref.sync.sync_to_async(thread_sensitive=True)``, the way Django runs the ORM
from async code. Thread-sensitive calls share one thread (per request under
Django's ASGI handler, or the thread of an ``async_to_sync`` caller), so they use
that thread's database connection and its open transaction: a command sent
inside ``transaction.atomic()`` still publishes only when that transaction commits.

Waiting (``result()``, ``wait()``, an update's bounded wait) sleeps through
``pause()``. On the synchronous path that is ``time.sleep``. Under a twin the call
runs on a greenlet of that thread, and ``pause()`` suspends it: the thread is handed
back, the event loop sleeps (``asyncio.sleep``) and the next poll resumes the call
where it stopped, in the same thread. A wait therefore blocks neither the event
loop nor the thread that every other thread-sensitive call needs.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import greenlet
from asgiref.sync import sync_to_async

S = TypeVar("S")
T = TypeVar("T")
TP = ParamSpec("TP")


class _Driven(greenlet.greenlet):
    """A greenlet running one synchronous client call for an awaitable twin."""


class _Done:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def pause(seconds: float) -> None:
    """Sleep between two polls: suspend the call under a twin, else ``time.sleep``."""
    current = greenlet.getcurrent()
    if isinstance(current, _Driven) and current.parent is not None:
        current.parent.switch(seconds)
    else:
        time.sleep(seconds)


def _begin(fn: Callable[..., Any], args: Any, kwargs: Any) -> tuple[_Driven, Any]:
    gr = _Driven(lambda: _Done(fn(*args, **kwargs)))
    gr.gr_context = contextvars.copy_context()
    return gr, gr.switch()


def _resume(gr: _Driven) -> Any:
    gr.parent = greenlet.getcurrent()  # whoever resumes it gets the next pause or the end
    return gr.switch()


def _abandon(gr: _Driven) -> None:
    if gr.dead:
        return
    gr.parent = greenlet.getcurrent()
    gr.throw()  # GreenletExit: the call unwinds at its pause (finally blocks run)


async def call(fn: Callable[TP, T], /, *args: TP.args, **kwargs: TP.kwargs) -> T:
    """``fn(*args, **kwargs)`` in the thread-sensitive thread, its pauses on the loop."""
    gr, step = await sync_to_async(_begin, thread_sensitive=True)(fn, args, kwargs)
    try:
        while not isinstance(step, _Done):
            await asyncio.sleep(step)
            step = await sync_to_async(_resume, thread_sensitive=True)(gr)
    finally:
        if not gr.dead:  # cancelled while paused: unwind the call in its own thread
            await sync_to_async(_abandon, thread_sensitive=True)(gr)
    value: T = step.value
    return value


def twin(
    method: Callable[Concatenate[S, TP], T],
) -> Callable[Concatenate[S, TP], Coroutine[Any, Any, T]]:
    """The awaitable twin of an instance method (named ``a<name>``).

    The twin looks the method up on the instance when called, so it runs whatever the
    class holds under that name (a subclass's override included).
    """
    name = method.__name__

    async def awaitable(self: S, /, *args: TP.args, **kwargs: TP.kwargs) -> T:
        bound: Callable[TP, T] = getattr(self, name)
        return await call(bound, *args, **kwargs)

    awaitable.__name__ = "await_" if name == "wait" else f"a{name}"
    awaitable.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + "." + awaitable.__name__
    awaitable.__doc__ = f"``{name}()`` as a coroutine; see ``{name}``."
    awaitable.__dw_twin_of__ = name  # type: ignore[attr-defined]
    return awaitable


def class_twin(
    method: Callable[Concatenate[type[S], TP], T],
) -> classmethod[S, TP, Coroutine[Any, Any, T]]:
    """The awaitable twin of a classmethod (named ``a<name>``), as ``twin`` does.

    Given the ``classmethod`` object itself (as the class body holds it).
    """
    function: Callable[..., Any] = getattr(method, "__func__", method)
    name = function.__name__

    async def awaitable(cls: type[S], /, *args: TP.args, **kwargs: TP.kwargs) -> T:
        bound: Callable[TP, T] = getattr(cls, name)
        return await call(bound, *args, **kwargs)

    awaitable.__name__ = f"a{name}"
    awaitable.__qualname__ = function.__qualname__.rsplit(".", 1)[0] + "." + awaitable.__name__
    awaitable.__doc__ = f"``{name}()`` as a coroutine; see ``{name}``."
    awaitable.__dw_twin_of__ = name  # type: ignore[attr-defined]
    return classmethod(awaitable)
