"""Which class a recorded failure is rebuilt as: looked up, never imported.

A failure row names the exception by ``exception_type`` (a durable type key)
and ``exception_class`` (the dotted path it had when it was raised). Those
strings come from history, and a history can come from outside (a bundle given
to ``workflow_replay``), so they must never choose a module to import. A
recorded failure resolves, in this order, through:

1. its ``exception_type`` among the type keys: ``EXCEPTION_TYPES`` in
   settings (``{type_key: class}``), then the classes that declare a
   ``type_key`` of their own;
2. its ``exception_class`` among the old class paths of
   ``EXCEPTION_CLASS_ALIASES`` (``{old dotted path: class}``: a class that moved);
3. its ``exception_class`` as a class this process has already imported: read
   from the namespace of a module in ``sys.modules`` (and of the classes in it),
   without importing anything or running a module's ``__getattr__``.

An exception class a workflow body can catch is one its module imported, so
step 3 finds every class a body can name. Whatever none of them finds is
unresolved (``resolve`` returns ``None``). Only subclasses of ``Exception``
whose metaclass is ``type`` count: a rebuilt failure is a subclass of one of
them, and a custom metaclass would run code to make it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Mapping
from typing import Any

_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class ExceptionTypes:
    """The configured maps (settings ``EXCEPTION_TYPES`` and ``EXCEPTION_CLASS_ALIASES``)."""

    by_type_key: Mapping[str, type] = dataclasses.field(default_factory=dict)
    by_old_path: Mapping[str, type] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, table in (("type key", self.by_type_key), ("class alias", self.by_old_path)):
            for key, cls in table.items():
                if not isinstance(key, str) or not key or not rebuildable(cls):
                    raise TypeError(
                        f"exception {name} {key!r} must map to a subclass of Exception "
                        f"(with the plain 'type' metaclass), not {cls!r}"
                    )


_configured = ExceptionTypes()
#: Declared ``type_key`` -> class, and the ``len(sys.modules)`` it was read at.
_declared: tuple[int, dict[str, type | None]] = (-1, {})


def configure(types: ExceptionTypes) -> None:
    """Install the maps for this process (the app does it from settings)."""
    global _configured
    _configured = types
    refresh()


def refresh() -> None:
    """Read the declared type keys again at the next lookup.

    They are read again by themselves whenever a module was imported since;
    a class made inside a function is only seen after that, or after this.
    """
    global _declared
    with _lock:
        _declared = (-1, {})


def configured() -> ExceptionTypes:
    return _configured


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def rebuildable(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, Exception) and type(cls) is type


def type_key_of(cls: type) -> str:
    """The ``exception_type`` a failure of ``cls`` is recorded with.

    Its own ``type_key`` (not one inherited from a parent), else the key
    ``EXCEPTION_TYPES`` gives it, else its dotted path.
    """
    own = vars(cls).get("type_key")
    if isinstance(own, str) and own:
        return own
    for key, mapped in _configured.by_type_key.items():
        if mapped is cls:
            return key
    return class_path(cls)


def resolve(exception_type: str, exception_class: str) -> type | None:
    """The class to rebuild a recorded failure as, or ``None`` when none is known."""
    found = _configured.by_type_key.get(exception_type) or _declared_type_key(exception_type)
    if found is None and exception_class:
        found = _configured.by_old_path.get(exception_class) or loaded_class(exception_class)
    return found


def unresolved(exception_type: str, exception_class: str) -> bool:
    """Does a recorded failure name a class that nothing here can stand for?

    True when neither its type key nor its class path resolves and the path names
    nothing at all among the loaded modules. A path that names something that cannot
    be rebuilt (a ``BaseException``, a class with a metaclass) is known, and a class
    made inside a function (``<locals>`` in its path) never has a name to look up:
    both are rebuilt as the base error, as is a failure recorded without a class.
    """
    if not exception_class or "<locals>" in exception_class:
        return False
    if resolve(exception_type, exception_class) is not None:
        return False
    return _loaded_object(exception_class) is None


def loaded_class(path: str) -> type | None:
    """The rebuildable class ``path`` names among the modules already imported."""
    found = _loaded_object(path)
    if rebuildable(found) and class_path(found) == path:
        return found  # type: ignore[no-any-return]
    return None


def _loaded_object(path: str) -> Any:
    """What ``path`` names in the namespaces of imported modules (and their classes)."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        found: Any = module
        for name in parts[cut:]:
            namespace = vars(found) if isinstance(found, type) or found is module else {}
            found = namespace.get(name)
            if found is None:
                break
        if found is not None:
            return found
    return None


def _declared_type_key(type_key: str) -> type | None:
    """The loaded exception class declaring ``type_key`` (read again when modules were added)."""
    global _declared
    with _lock:
        seen, table = _declared
        if seen != len(sys.modules):
            table = _scan_declared()
            _declared = (len(sys.modules), table)
        return table.get(type_key)


def _scan_declared() -> dict[str, type | None]:
    """``type_key`` -> class over every loaded ``Exception`` subclass (``None``: claimed twice)."""
    table: dict[str, type | None] = {}
    stack: list[type] = [Exception]
    seen: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        key = vars(cls).get("type_key")
        if isinstance(key, str) and key and rebuildable(cls):
            table[key] = None if key in table and table[key] is not cls else cls
    return table
