"""The declared types a payload decodes into, read from the receiving signature.

A workflow's or activity's ``handle()``, a signal, update or query handler: its
parameter annotations type the arguments it receives, its return annotation
types the result its caller receives. Annotations are evaluated once per
function, in the function's own module; one that cannot be evaluated (a name
imported only under ``TYPE_CHECKING``) types nothing rather than failing.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: A declared type (a class, a generic alias, a union...) or None for "anything".
Hint = Any


@dataclass(frozen=True)
class Signature:
    """Hints of a callable's positional parameters (without ``self``) and of its result."""

    params: tuple[Hint, ...] = ()
    varargs: Hint = None
    result: Hint = None
    names: tuple[str, ...] = ()
    keyword_only: tuple[str, ...] = ()

    def argument(self, index: int) -> Hint:
        """The hint of the ``index``-th (0-based) positional argument."""
        if index < len(self.params):
            return self.params[index]
        return self.varargs

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any], what: str) -> list[Any]:
        """Keyword arguments moved to their positions; durable calls store positions only."""
        if not kwargs:
            return list(args)
        values = list(args)
        for position in range(len(values), len(self.names)):
            name = self.names[position]
            if name not in kwargs:
                break
            values.append(kwargs.pop(name))
        if kwargs:
            unknown = ", ".join(sorted(kwargs))
            raise TypeError(
                f"{what} got keyword arguments it cannot pass by position: {unknown} "
                "(durable calls store arguments by position; pass them in order)"
            )
        return values


UNTYPED = Signature()


def _evaluate(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:
        pass
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    namespace = dict(vars(module)) if module is not None else {}
    hints: dict[str, Any] = {}
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)
            except Exception:
                continue
        hints[name] = annotation
    return hints


@functools.lru_cache(maxsize=2048)
def signature_of(fn: Callable[..., Any], *, method: bool = True) -> Signature:
    """Hints of ``fn``; ``method=True`` skips its first parameter (``self``)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return UNTYPED
    if method and parameters and parameters[0].kind <= inspect.Parameter.POSITIONAL_OR_KEYWORD:
        parameters = parameters[1:]
    hints = _evaluate(fn)
    positional, names, keyword_only, varargs = [], [], [], None
    for parameter in parameters:
        if parameter.kind <= inspect.Parameter.POSITIONAL_OR_KEYWORD:
            positional.append(hints.get(parameter.name))
            names.append(parameter.name)
        elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            varargs = hints.get(parameter.name)
        elif parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            keyword_only.append(parameter.name)
    return Signature(
        params=tuple(positional),
        varargs=varargs,
        result=hints.get("return"),
        names=tuple(names),
        keyword_only=tuple(keyword_only),
    )


def handle_signature(cls: type | None) -> Signature:
    """The signature of a workflow's or activity's ``handle()``."""
    handle = getattr(cls, "handle", None) if cls is not None else None
    return signature_of(handle) if callable(handle) else UNTYPED


_UNWRAPPED: dict[Any, Any] = {}


def unwrap(hint: Hint) -> Hint:
    """``Annotated[T, ...]`` → T, a ``NewType`` → its base, ``Any``/``object``/TypeVar → None.

    Remembered per hint: it runs for every value decoded against a declared type.
    """
    try:
        return _UNWRAPPED[hint]
    except KeyError:
        unwrapped = _UNWRAPPED[hint] = _unwrap(hint)
        return unwrapped
    except TypeError:  # an unhashable annotation object
        return _unwrap(hint)


def _unwrap(hint: Hint) -> Hint:
    while True:
        if hint is Any or hint is object or isinstance(hint, typing.TypeVar):
            return None
        origin: Any = typing.get_origin(hint)
        if origin is typing.Annotated:
            hint = typing.get_args(hint)[0]
        elif hasattr(hint, "__supertype__"):
            hint = hint.__supertype__
        elif origin is typing.Literal or origin is typing.ClassVar:
            return None
        else:
            return hint
