"""Refusing clocks, randomness, the environment and I/O inside workflow code.

Workflow code (a body, a branch, a handler, a query, a wait predicate) runs on a
``BodyGreenlet``. The wrappers that ``durable_workflow.unsafe_calls`` puts around
``time.time``, ``random.random`` and the rest call ``check(name)`` first. On any
other greenlet or thread that is one ``getcurrent()`` and one attribute read;
the slow path below runs only when workflow code made the call.

The slow path lets two things through that read the clock for their own
purposes and never feed a value back into the body: logging (a ``LogRecord``
takes its creation time) and imports (a module may read the clock or the
environment while it initialises, once per process). It lets everything
through inside ``allowed()``, which ``dw.side_effect`` wraps around its
function: there the value is recorded, so replay returns the same one.

What happens then is the run's policy (``Workflow.unsafe_calls``, else the
``UNSAFE_CALLS`` setting): ``"raise"`` stops the workflow task with
``NonDeterministicCallError`` (like a database query, it cannot be caught by
the body), ``"warn"`` logs the call once per call site, ``"allow"`` says nothing.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Literal

import greenlet

from durable_workflow.exceptions import ConfigurationError, NonDeterministicCallError

Policy = Literal["raise", "warn", "allow"]
POLICIES: tuple[str, ...] = ("raise", "warn", "allow")

#: The process-wide default; ``UNSAFE_CALLS`` sets it when the app is ready.
DEFAULT_POLICY: Policy = "raise"

logger = logging.getLogger("durable_workflow.guards")

_LOGGING_DIR = os.path.dirname(logging.__file__)
_ENGINE_DIR = os.path.dirname(__file__)
_PACKAGE_DIR = os.path.dirname(_ENGINE_DIR)
_GUARD_FILES = {__file__, os.path.join(_PACKAGE_DIR, "unsafe_calls.py")}
_warned: set[tuple[str, str, int]] = set()
#: Libraries whose guarded calls mean more than a non-deterministic call: (directory, error).
_attributed: list[tuple[str, Callable[[], BaseException]]] = []


def validate_policy(value: object, where: str) -> Policy:
    """``value`` if it is one of the three policies, else a ``ConfigurationError``."""
    if value not in POLICIES:
        raise ConfigurationError(f"{where} must be one of {', '.join(POLICIES)}; got {value!r}")
    policy: Policy = value  # type: ignore[assignment]
    return policy


def set_default_policy(value: object) -> None:
    global DEFAULT_POLICY
    DEFAULT_POLICY = validate_policy(value, "UNSAFE_CALLS")


def check(name: str) -> None:
    """Called by every guarded function before it runs (the hot path: keep it short)."""
    try:
        gr = greenlet.getcurrent()
    except RuntimeError:  # a greenlet being finalized: no workflow code runs there
        return
    runtime = getattr(gr, "dw_runtime", None)
    if runtime is not None and not gr.dw_allowed:  # type: ignore[attr-defined]
        refuse(gr, runtime, name)


@contextlib.contextmanager
def allowed() -> Iterator[None]:
    """Let guarded calls through on this greenlet (``dw.side_effect`` records their value)."""
    gr = greenlet.getcurrent()
    if getattr(gr, "dw_runtime", None) is None:
        yield
        return
    before = gr.dw_allowed  # type: ignore[attr-defined]
    gr.dw_allowed = True  # type: ignore[attr-defined]
    try:
        yield
    finally:
        gr.dw_allowed = before  # type: ignore[attr-defined]


def attribute(directory: str, error: Callable[[], BaseException]) -> None:
    """Refuse a guarded call that a library under ``directory`` makes for workflow code
    with ``error()`` rather than ``NonDeterministicCallError``, under the policies
    ``"raise"`` and ``"warn"`` alike (the executor's ORM guard attributes Django's
    database layer: opening a connection reads the clock and opens a socket, and that
    is the body touching the database, whichever alias it names)."""
    entry = (os.path.join(directory, ""), error)
    if entry not in _attributed:
        _attributed.append(entry)


def policy_of(runtime: Any) -> Policy:
    """The run's policy: its workflow class's ``unsafe_calls``, else the default."""
    cls = getattr(runtime, "workflow_class", None) or type(getattr(runtime, "instance", None))
    declared = getattr(cls, "unsafe_calls", None)
    return declared if declared in POLICIES else DEFAULT_POLICY


def refuse(gr: Any, runtime: Any, name: str) -> None:
    """The slow path: workflow code on ``gr`` made the guarded call ``name``."""
    policy = policy_of(runtime)
    if policy == "allow":
        return  # a database query is still refused where it runs (the ORM guard)
    frame = _caller(sys._getframe(1))
    own = _own_file(runtime)
    if frame is None or _for_the_engine(frame, own) or _exempt(frame):
        return
    attributed = _attributed_error(frame)
    if attributed is not None:
        gr.dw_allowed = True
        runtime.fail_fatally(attributed)
    filename, lineno = _blame(frame, own)
    error = NonDeterministicCallError(name, filename=filename, lineno=lineno)
    if policy == "warn":
        key = (name, filename, lineno)
        if key not in _warned:
            _warned.add(key)
            gr.dw_allowed = True  # the log record reads the clock itself
            try:
                logger.warning("%s", error)
            finally:
                gr.dw_allowed = False
        return
    gr.dw_allowed = True  # nothing the unwinding runs is refused again
    runtime.fail_fatally(error)


def _caller(frame: types.FrameType | None) -> types.FrameType | None:
    """The frame that called the guarded function (past the guard's own frames)."""
    while frame is not None and frame.f_code.co_filename in _GUARD_FILES:
        frame = frame.f_back
    return frame


def _attributed_error(frame: types.FrameType | None) -> BaseException | None:
    """The error of the attributed library that made the call, if one did: looked for
    among the library frames between the call and the workflow code that caused it."""
    if not _attributed:
        return None
    while frame is not None:
        filename = frame.f_code.co_filename
        for directory, error in _attributed:
            if filename.startswith(directory):
                return error()
        if not _installed_library(filename):
            return None
        frame = frame.f_back
    return None


def _own_file(runtime: Any) -> str | None:
    """The source file of the run's workflow class."""
    cls = getattr(runtime, "workflow_class", None) or type(getattr(runtime, "instance", None))
    module = sys.modules.get(getattr(cls, "__module__", ""), None)
    return getattr(module, "__file__", None)


def _for_the_engine(frame: types.FrameType | None, own: str | None) -> bool:
    """True when the engine made the call through a library (payload storage writing a
    file, an id read from the clock), not workflow code.

    Walking out from the call, library frames (the standard library, installed
    packages) are passed over; the first other frame decides: this package's means
    the engine called, anything else (the workflow's module first) is workflow code.
    """
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == own:
            return False
        if filename.startswith(_PACKAGE_DIR):
            return True
        if not _installed_library(filename):
            return False
        frame = frame.f_back
    return False


def _installed_library(filename: str) -> bool:
    return (
        filename.startswith("<")
        or filename.startswith(_STDLIB_DIR)
        or "site-packages" in filename
        or "dist-packages" in filename
    )


def call_site(frame: types.FrameType | None) -> str | None:
    """``file:line`` of the innermost workflow-code frame (outside this package and
    installed libraries) from ``frame`` outward: where a ``dw.*`` call was made."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR) and not _installed_library(filename):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _exempt(frame: types.FrameType | None) -> bool:
    """Logging and importing read the clock for themselves, never for the body; so do
    code the interpreter runs in between (garbage-collector callbacks, finalizers,
    signal handlers), whichever greenlet it interrupts."""
    callbacks = _interpreter_callbacks()
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if filename.startswith(_LOGGING_DIR) or filename.startswith("<frozen importlib"):
            return True
        if code.co_name == "__del__" or code in callbacks:
            return True
        frame = frame.f_back
    return False


def _interpreter_callbacks() -> set[types.CodeType]:
    found: list[object] = [*gc.callbacks]
    for number in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            found.append(signal.getsignal(number))
    return {code for fn in found if (code := getattr(fn, "__code__", None)) is not None}


_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(signal, name)
]


def _blame(frame: types.FrameType | None, own: str | None) -> tuple[str, int]:
    """File and line of the workflow code that made the call.

    The innermost frame in the workflow class's module wins; else the innermost
    frame outside installed libraries and this package; else the direct caller.
    """
    first = frame
    fallback: types.FrameType | None = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if own is not None and filename == own:
            return filename, frame.f_lineno
        library = _installed_library(filename) or filename.startswith(_PACKAGE_DIR)
        if fallback is None and not library:
            fallback = frame
        frame = frame.f_back
    chosen = fallback or first
    if chosen is None:
        return "<unknown>", 0
    return chosen.f_code.co_filename, chosen.f_lineno


_STDLIB_DIR = os.path.dirname(os.__file__)
