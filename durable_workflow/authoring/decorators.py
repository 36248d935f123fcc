"""``@dw.query``, ``@dw.update`` (with ``.validator``) and ``@dw.signal`` for workflow methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from durable_workflow import text
from durable_workflow.engine.asyncguard import refuse_async_methods

F = Callable[..., Any]
Fn = TypeVar("Fn", bound=Callable[..., Any])
S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


class UpdateMethod(Generic[S, P, R]):
    """An update handler (``@dw.update``); ``@handler.validator`` attaches a validator.

    Read on the class (``OrderWorkflow.mark_ready``) it is this object, which
    ``WorkflowStub.update()`` accepts to check the arguments and type the result;
    read on an instance it is the bound method.
    """

    def __init__(self, fn: Callable[Concatenate[S, P], R], name: str) -> None:
        self.fn = fn
        self.name = name
        self.validator_fn: F | None = None
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)

    def validator(self, fn: Fn) -> Fn:
        refuse_async_methods([(f"the validator of update {self.name!r}", fn)])
        self.validator_fn = fn
        return fn

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> UpdateMethod[S, P, R]: ...
    @overload
    def __get__(self, instance: S, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self.fn.__get__(instance, owner)


def _named(name: str | F | None, build: Callable[[F, str], Any], kind: str) -> Any:
    if callable(name):  # used bare: @dw.query
        fn = name
        refuse_async_methods([(f"@dw.{kind} {fn.__qualname__}", fn)])
        return build(fn, fn.__name__)

    def decorate(fn: F) -> Any:
        refuse_async_methods([(f"@dw.{kind} {getattr(fn, '__qualname__', fn)}", fn)])
        return build(fn, name or fn.__name__)

    return decorate


@overload
def query(name: Fn, /) -> Fn: ...
@overload
def query(name: str | None = None, /) -> Callable[[Fn], Fn]: ...
def query(name: str | F | None = None, /) -> Any:
    """Expose a read-only method to ``WorkflowStub.query`` under a durable name."""

    def build(fn: F, public: str) -> F:
        fn._dw_query_name = public  # type: ignore[attr-defined]
        return fn

    return _named(name, build, "query")


@overload
def update(name: Callable[Concatenate[S, P], R], /) -> UpdateMethod[S, P, R]: ...
@overload
def update(
    name: str | None = None, /
) -> Callable[[Callable[Concatenate[S, P], R]], UpdateMethod[S, P, R]]: ...
def update(name: str | F | None = None, /) -> Any:
    """Expose a state-changing method to ``WorkflowStub.update`` under a durable name."""
    return _named(name, lambda fn, public: UpdateMethod(fn, public), "update")


@overload
def signal(name: Fn, /) -> Fn: ...
@overload
def signal(name: str | None = None, /) -> Callable[[Fn], Fn]: ...
def signal(name: str | F | None = None, /) -> Any:
    """Handle a signal in a method instead of waiting for it with ``wait_signal``."""

    def build(fn: F, public: str) -> F:
        fn._dw_signal_name = public  # type: ignore[attr-defined]
        return fn

    return _named(name, build, "signal")


def collect(cls: type) -> None:
    """Gather the decorated methods of a workflow class into lookup tables."""
    from durable_workflow.contracts import normalize_params
    from durable_workflow.exceptions import ConfigurationError

    queries: dict[str, str] = {}
    updates: dict[str, UpdateMethod[Any, ..., Any]] = {}
    handlers: dict[str, str] = {}
    for attr in dir(cls):
        value = getattr(cls, attr, None)
        if isinstance(value, UpdateMethod):
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
