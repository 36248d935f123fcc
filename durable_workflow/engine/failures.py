"""Moving exceptions across the durable boundary and back.

An exception raised in an activity is stored as fields (type, class, message).
When the failure is replayed into a workflow body the engine rebuilds an
exception that matches ``except OriginalClass`` *and* ``except ActivityFailed``.
"""

from __future__ import annotations

import importlib
import traceback as tb
from typing import Any

from durable_workflow.engine.commands import FailureInfo
from durable_workflow.exceptions import ActivityFailed, NonRetryableError
from durable_workflow.text import storable, text_of

_combined_cache: dict[tuple[type, type], type] = {}


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def describe(exc: BaseException, *, category: str = "application") -> FailureInfo:
    """The exception as durable fields, every text storable (escaped, never dropped)."""
    cls = type(exc)
    return FailureInfo(
        exception_type=text_of(getattr(cls, "type_key", None) or class_path(cls)),
        exception_class=storable(class_path(cls)),
        message=text_of(exc),
        traceback=storable("".join(tb.format_exception(exc))),
        category=category,
        non_retryable=isinstance(exc, NonRetryableError),
    )


def resolve_class(path: str) -> type | None:
    module_name, _, qualname = path.rpartition(".")
    while module_name:
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            qualname = f"{module_name.rpartition('.')[2]}.{qualname}"
            module_name = module_name.rpartition(".")[0]
            continue
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj if isinstance(obj, type) else None
    return None


def rebuild(base: type[ActivityFailed], payload: dict[str, Any]) -> BaseException:
    """An exception for a recorded failure payload, raised into a workflow body."""
    message = str(payload.get("message", ""))
    fields = {
        "activity_type": str(payload.get("activity_type", "")),
        "exception_type": str(payload.get("exception_type", "")),
        "exception_class": str(payload.get("exception_class", "")),
        "non_retryable": bool(payload.get("non_retryable", False)),
        "failure_id": payload.get("failure_id"),
    }
    original = resolve_class(fields["exception_class"]) if fields["exception_class"] else None
    cls: type = base
    if original is not None and issubclass(original, Exception) and not issubclass(original, base):
        cls = _combined(base, original)
    try:
        exc = cls.__new__(cls)
        base.__init__(exc, message, **fields)
        exc.args = (message,)
    except TypeError:
        exc = base(message, **fields)
    return exc


def _combined(base: type, original: type) -> type:
    key = (base, original)
    if key not in _combined_cache:
        try:
            _combined_cache[key] = type(
                original.__name__,
                (original, base),
                {"__module__": original.__module__, "__qualname__": original.__qualname__},
            )
        except TypeError:  # incompatible C layouts, e.g. OSError subclasses
            _combined_cache[key] = base
    return _combined_cache[key]
