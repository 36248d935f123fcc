"""Moving exceptions across the durable boundary and back.

An exception raised in an activity is stored as fields (type, class, message).
When the failure is replayed into a workflow body the engine rebuilds an
exception that matches ``except OriginalClass`` *and* ``except ActivityFailed``.
Which class that is comes from ``exception_types.resolve`` (never an import);
the rebuilt class is made without running the original's ``__init_subclass__``
or ``__new__``, so naming a class in a history runs none of its code.
"""

from __future__ import annotations

import dataclasses
import threading
import traceback as tb
from collections.abc import Callable, Iterable
from typing import Any

from durable_workflow.engine import exception_types
from durable_workflow.engine.commands import FailureInfo
from durable_workflow.engine.exception_types import class_path
from durable_workflow.exceptions import (
    ActivityFailed,
    ChildWorkflowCancelled,
    CommandRejected,
    DurableOperationCancelled,
    DurableWorkflowError,
    NonRetryableError,
    UnresolvedFailureError,
)
from durable_workflow.text import storable, text_of

__all__ = ["Rebuilt", "class_path", "describe", "rebuild"]

_combined_cache: dict[tuple[type, type], type] = {}
_combined_lock = threading.Lock()

#: What fails a run whatever the workflow declares: a failure that arrived durably (an
#: activity or child that failed, timed out or was cancelled, a cancelled ``select()``
#: member, a command to another workflow that history records as rejected, a child
#: start refused) and a ``NonRetryableError`` raised on purpose.
RUN_FAILURES: tuple[type[BaseException], ...] = (
    ActivityFailed,
    ChildWorkflowCancelled,
    CommandRejected,
    DurableOperationCancelled,
    NonRetryableError,
)

#: Never a failure of anything: the process is being stopped (the task runs again).
INTERRUPTS = (KeyboardInterrupt, SystemExit)


class BodyFailed(DurableWorkflowError):
    """A body raised what its workflow does not declare as a failure of the run (most
    likely a bug): the workflow task fails and the run waits, open, for a fix and a
    repair. ``error`` is what the body raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"{type(error).__name__}: {text_of(error)}")


def matches(exc: BaseException, declared: Iterable[type | str]) -> bool:
    """Is ``exc`` one of ``declared``: a class it is an instance of, or the name, dotted
    path or ``type_key`` of a class in its MRO?"""
    names: set[str] = set()
    for entry in declared:
        if isinstance(entry, type):
            if isinstance(exc, entry):
                return True
        else:
            names.add(entry)
    if not names:
        return False
    for cls in type(exc).__mro__:
        if {cls.__name__, class_path(cls), getattr(cls, "type_key", None)} & names:
            return True
    return False


def fails_run(exc: BaseException, declared: Iterable[type | str]) -> bool:
    """Does an exception escaping a body fail the run (rather than its workflow task)?"""
    return isinstance(exc, RUN_FAILURES) or matches(exc, declared)


@dataclasses.dataclass(slots=True)
class FailurePolicy:
    """What an exception escaping workflow code fails: the run, or only its task."""

    #: The workflow instance (its class's ``failure_exception_types``), once built.
    instance: Callable[[], Any]
    #: The deployment's ``FAILURE_EXCEPTION_TYPES``.
    deployment: tuple[type | str, ...] = ()

    def declared(self) -> tuple[type | str, ...]:
        own = getattr(type(self.instance()), "failure_exception_types", None) or ()
        return (*self.deployment, *own)


class Rebuilt:
    """First base of every rebuilt class.

    Creating a class runs ``__init_subclass__`` of the first base after it in
    its MRO: this empty hook stands there so the original class's never runs.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass


def describe(exc: BaseException, *, category: str = "application") -> FailureInfo:
    """The exception as durable fields, every text storable (escaped, never dropped)."""
    cls = type(exc)
    return FailureInfo(
        exception_type=text_of(exception_types.type_key_of(cls)),
        exception_class=storable(class_path(cls)),
        message=text_of(exc),
        traceback=storable("".join(tb.format_exception(exc))),
        category=category,
        non_retryable=isinstance(exc, NonRetryableError),
    )


def rebuild(base: type[DurableWorkflowError], payload: dict[str, Any]) -> BaseException:
    """An exception for a recorded failure payload, raised into a workflow body.

    ``base`` is ``ActivityFailed`` or one of the child-workflow errors; every one
    takes the message and the failure's fields as keywords. A failure naming a
    class that resolves to nothing raises ``UnresolvedFailureError`` instead: the
    caller stops the replay (the body never sees it).
    """
    message = str(payload.get("message", ""))
    exception_type = str(payload.get("exception_type", ""))
    exception_class = str(payload.get("exception_class", ""))
    fields: dict[str, Any] = {
        "activity_type": str(payload.get("activity_type", "")),
        "exception_type": exception_type,
        "exception_class": exception_class,
        "non_retryable": bool(payload.get("non_retryable", False)),
        "failure_id": payload.get("failure_id"),
    }
    original = exception_types.resolve(exception_type, exception_class)
    if original is None and exception_types.unresolved(exception_type, exception_class):
        raise UnresolvedFailureError(exception_type, exception_class, payload.get("failure_id"))
    cls: type = base
    if original is not None and not issubclass(original, base):
        cls = _combined(base, original)
    init: Callable[..., None] = base.__init__
    try:
        # BaseException's own __new__: a __new__ of the original class never runs.
        exc: BaseException = BaseException.__new__(cls)
        init(exc, message, **fields)
        exc.args = (message,)
    except TypeError:
        make: Callable[..., BaseException] = base
        exc = make(message, **fields)
    return exc


def _combined(base: type, original: type) -> type:
    key = (base, original)
    with _combined_lock:
        if key not in _combined_cache:
            try:
                _combined_cache[key] = type(
                    original.__name__,
                    (Rebuilt, original, base),
                    {"__module__": original.__module__, "__qualname__": original.__qualname__},
                )
            except TypeError:  # incompatible C layouts, e.g. OSError subclasses
                _combined_cache[key] = base
        return _combined_cache[key]
