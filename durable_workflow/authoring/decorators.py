"""``@dw.query``, ``@dw.update`` (with ``.validator``) and ``@dw.signal`` for workflow methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_workflow import text

F = Callable[..., Any]


class _UpdateMethod:
    """Marks an update handler; ``@handler.validator`` attaches a validator."""

    def __init__(self, fn: F, name: str) -> None:
        self.fn = fn
        self.name = name
        self.validator_fn: F | None = None
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def validator(self, fn: F) -> F:
        self.validator_fn = fn
        return fn

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self.fn.__get__(instance, owner)


def _named(kind: str, name: str | F | None, build: Callable[[F, str], Any]) -> Any:
    if callable(name):  # used bare: @dw.query
        fn = name
        return build(fn, fn.__name__)

    def decorate(fn: F) -> Any:
        return build(fn, name or fn.__name__)

    return decorate


def query(name: str | F | None = None) -> Any:
    """Expose a read-only method to ``WorkflowStub.query`` under a durable name."""

    def build(fn: F, public: str) -> F:
        fn._dw_query_name = public  # type: ignore[attr-defined]
        return fn

    return _named("query", name, build)


def update(name: str | F | None = None) -> Any:
    """Expose a state-changing method to ``WorkflowStub.update`` under a durable name."""
    return _named("update", name, lambda fn, public: _UpdateMethod(fn, public))


def signal(name: str | F | None = None) -> Any:
    """Handle a signal in a method instead of waiting for it with ``wait_signal``."""

    def build(fn: F, public: str) -> F:
        fn._dw_signal_name = public  # type: ignore[attr-defined]
        return fn

    return _named("signal", name, build)


def collect(cls: type) -> None:
    """Gather the decorated methods of a workflow class into lookup tables."""
    from durable_workflow.contracts import normalize_params
    from durable_workflow.exceptions import ConfigurationError

    queries: dict[str, str] = {}
    updates: dict[str, _UpdateMethod] = {}
    handlers: dict[str, str] = {}
    for attr in dir(cls):
        value = getattr(cls, attr, None)
        if isinstance(value, _UpdateMethod):
            updates[value.name] = value
        elif callable(value) and hasattr(value, "_dw_query_name"):
            queries[value._dw_query_name] = attr
        elif callable(value) and hasattr(value, "_dw_signal_name"):
            handlers[value._dw_signal_name] = attr
    contracts: dict[str, list[dict[str, Any]] | None] = {}
    for entry in getattr(cls, "signals", []) or []:
        if isinstance(entry, str):
            contracts[entry] = None
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            contracts[entry["name"]] = normalize_params(entry["name"], entry.get("params"))
        else:
            raise ConfigurationError(f"{cls.__name__}.signals entries must be names or dicts")
    for name in handlers:
        contracts.setdefault(name, None)
    for kind, names in (
        ("query", queries),
        ("update", updates),
        ("signal", contracts),
    ):
        for name in names:
            reason = text.problem(name, max_length=text.NAME_MAX)
            if reason is not None:
                raise ConfigurationError(f"{cls.__name__}: the {kind} name {name!r} {reason}")
    cls._dw_queries = queries  # type: ignore[attr-defined]
    cls._dw_updates = updates  # type: ignore[attr-defined]
    cls._dw_signal_handlers = handlers  # type: ignore[attr-defined]
    cls._dw_signal_contracts = contracts  # type: ignore[attr-defined]
