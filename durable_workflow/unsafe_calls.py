"""Which calls workflow code may not make, and the wrappers that catch them.

``install()`` runs once per process, when the app is ready (before workflow
modules are imported, so ``from time import time`` in one of them gets the
wrapper too). It replaces module attributes of the standard library with
wrappers that ask ``engine.guards.check`` first, adds one audit hook for
blocking I/O, and guards Django's cache handler. Outside workflow code every
wrapper costs one ``greenlet.getcurrent()`` and one attribute read.

``datetime.now()``, ``utcnow()``, ``today()`` and ``date.today()`` are methods of
C types that cannot be replaced without changing the type of every datetime in
the process; they are left alone.
"""

from __future__ import annotations

import _thread
import functools
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import greenlet

from durable_workflow.engine import guards

#: Module attributes replaced by a guarded wrapper, by module.
MODULE_CALLS: dict[Any, tuple[str, ...]] = {
    time: (
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "sleep",
    ),
    random: tuple(
        name
        for name in random.__all__
        if callable(getattr(random, name)) and not isinstance(getattr(random, name), type)
    ),
    uuid: ("uuid1", "uuid4"),
    os: ("urandom", "getpid", "system"),
    secrets: ("token_bytes", "token_hex", "token_urlsafe", "choice", "randbelow", "randbits"),
    _thread: ("start_new_thread",),
}

#: Audit events (PEP 578) refused in workflow code, with the name the error gives them.
AUDIT_EVENTS: dict[str, str] = {
    "open": "open",  # only for writing: see _on_audit
    "socket.connect": "socket.connect",
    "socket.getaddrinfo": "socket.getaddrinfo",
    "socket.gethostbyname": "socket.gethostbyname",
    "socket.gethostbyaddr": "socket.gethostbyaddr",
    "socket.bind": "socket.bind",
    "urllib.Request": "urllib.request",
    "subprocess.Popen": "subprocess.Popen",
    "os.exec": "os.exec",
    "os.posix_spawn": "os.posix_spawn",
    "os.spawn": "os.spawn",
    "os.fork": "os.fork",
}

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_installed = False


def guarded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` behind the guard: refused in workflow code, unchanged elsewhere."""
    getcurrent = greenlet.getcurrent
    refuse = guards.refuse

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            gr = getcurrent()
        except RuntimeError:  # a greenlet being finalized: no workflow code runs there
            return fn(*args, **kwargs)
        runtime = getattr(gr, "dw_runtime", None)
        if runtime is not None and not gr.dw_allowed:  # type: ignore[attr-defined]
            refuse(gr, runtime, name)
        return fn(*args, **kwargs)

    call.dw_guarded = True  # type: ignore[attr-defined]
    return call


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    name = AUDIT_EVENTS.get(event)
    if name is None:
        return
    try:
        gr = greenlet.getcurrent()
    except RuntimeError:
        return
    runtime = getattr(gr, "dw_runtime", None)
    if runtime is None or gr.dw_allowed:  # type: ignore[attr-defined]
        return
    if event == "open" and not _writes(args):
        return  # reading a file (a template, a data file) replays the same
    guards.refuse(gr, runtime, f"{name}({args[0]!r})" if event == "open" else name)


def _writes(args: tuple[Any, ...]) -> bool:
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


class _GuardedEnviron(type(os.environ)):  # type: ignore[misc]
    """``os.environ`` whose reads are refused in workflow code (writes go through)."""

    def __getitem__(self, key: Any) -> Any:
        guards.check("os.environ")
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[Any]:
        guards.check("os.environ")
        keys: Iterator[Any] = super().__iter__()
        return keys


def _guard_django_cache() -> None:
    from django.core.cache import caches

    handler = type(caches)
    if getattr(handler, "dw_guarded", False):
        return

    class GuardedCacheHandler(handler):  # type: ignore[misc, valid-type]
        dw_guarded = True

        def __getitem__(self, alias: str) -> Any:
            guards.check("django.core.cache")
            return super().__getitem__(alias)

    caches.__class__ = GuardedCacheHandler


def install() -> None:
    """Put the guards in place (once per process; later calls do nothing)."""
    global _installed
    if _installed:
        return
    _installed = True
    for module, names in MODULE_CALLS.items():
        for name in names:
            original = getattr(module, name)
            if not getattr(original, "dw_guarded", False):
                setattr(module, name, guarded(f"{module.__name__}.{name}", original))
    if not getattr(threading.Thread.start, "dw_guarded", False):
        threading.Thread.start = guarded("threading.Thread.start", threading.Thread.start)  # type: ignore[method-assign]
    os.environ.__class__ = _GuardedEnviron
    sys.addaudithook(_on_audit)
    _guard_django_cache()
