"""Converters the application registers for its own types (``dw.register_converter``).

A registration names the class (or, with ``subclasses=True``, a base class and
its whole family), a stable ``name`` stored in payloads, and two functions:
``encode(value)`` returns plain data (which may itself hold supported values),
``decode(data, cls)`` rebuilds an instance of ``cls``: the class the receiving
code declares, or the registered class when nothing is declared.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from durable_workflow.exceptions import ConfigurationError

T = TypeVar("T")

_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@dataclass(frozen=True)
class Converter:
    cls: type
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any, type], Any]
    subclasses: bool


_lock = threading.Lock()
_by_class: dict[type, Converter] = {}
_by_name: dict[str, Converter] = {}


def register_converter(
    cls: type[T],
    *,
    name: str,
    encode: Callable[[T], Any],
    decode: Callable[[Any, type[T]], T],
    subclasses: bool = False,
) -> None:
    """Teach the data converter a type of yours; see docs/how-to/passing-data.md.

    ``name`` is stored in every payload of this type, so keep it stable. Registering
    a class again replaces its converter; a name claimed by another class is refused.
    """
    if not isinstance(cls, type):
        raise ConfigurationError(f"register_converter() takes a class, not {cls!r}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"converter names are 1 to 64 letters, digits, '.', '_', ':' or '-'; got {name!r}"
        )
    if not callable(encode) or not callable(decode):
        raise ConfigurationError("register_converter() needs callable encode and decode")
    converter = Converter(cls, name, encode, decode, subclasses)
    with _lock:
        claimed = _by_name.get(name)
        if claimed is not None and claimed.cls is not cls:
            raise ConfigurationError(
                f"converter name {name!r} is already registered for {claimed.cls.__qualname__}"
            )
        previous = _by_class.pop(cls, None)
        if previous is not None:
            _by_name.pop(previous.name, None)
        _by_class[cls] = converter
        _by_name[name] = converter


def unregister_converter(cls: type) -> None:
    """Forget the converter of ``cls`` (mostly for tests)."""
    with _lock:
        converter = _by_class.pop(cls, None)
        if converter is not None:
            _by_name.pop(converter.name, None)


def for_class(cls: type) -> Converter | None:
    """The converter of ``cls``: its own, else the nearest base registered with subclasses."""
    if not _by_class:
        return None
    exact = _by_class.get(cls)
    if exact is not None:
        return exact
    for base in cls.__mro__[1:]:
        found = _by_class.get(base)
        if found is not None and found.subclasses:
            return found
    return None


def by_name(name: str) -> Converter | None:
    return _by_name.get(name)
