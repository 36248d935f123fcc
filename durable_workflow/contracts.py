"""Argument contracts for signals, updates and queries.

A signal may declare an ordered parameter list (``{"name", "type",
"allows_null", "required"}``); updates and queries use their method's Python
signature. Either way, arguments arrive as a positional list or a named map
and leave as a positional list in declaration order, or as a map of
``validation_errors`` (parameter name -> messages).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from durable_workflow.exceptions import ConfigurationError

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "int": (int,),
    "integer": (int,),
    "float": (int, float),
    "number": (int, float),
    "bool": (bool,),
    "boolean": (bool,),
    "array": (list,),
    "list": (list,),
    "object": (dict,),
    "dict": (dict,),
    "map": (dict,),
    "mixed": (object,),
    "any": (object,),
}

Errors = dict[str, list[str]]


class ArgumentsInvalid(Exception):
    def __init__(self, errors: Errors):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {', '.join(v)}" for k, v in errors.items()))


def normalize_params(name: str, params: Any) -> list[dict[str, Any]] | None:
    """Check a declared signal parameter list once, at class definition."""
    if params is None:
        return None
    if not isinstance(params, list | tuple):
        raise ConfigurationError(f"signal {name!r}: params must be a list")
    out = []
    for param in params:
        if isinstance(param, str):
            param = {"name": param}
        if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
            raise ConfigurationError(f"signal {name!r}: each param needs a 'name'")
        kind = param.get("type", "mixed")
        if kind not in _TYPES:
            raise ConfigurationError(f"signal {name!r}: unknown param type {kind!r}")
        out.append(
            {
                "name": param["name"],
                "type": kind,
                "allows_null": bool(param.get("allows_null", False)),
                "required": bool(param.get("required", True)),
            }
        )
    return out


def check_params(params: list[dict[str, Any]] | None, arguments: Any) -> list[Any]:
    """Validate arguments against a declared parameter list; returns them in order."""
    if isinstance(arguments, tuple):
        arguments = list(arguments)
    if params is None:
        if isinstance(arguments, Mapping):
            return [dict(arguments)] if arguments else []
        return list(arguments)
    errors: Errors = {}
    names = [p["name"] for p in params]
    if isinstance(arguments, Mapping):
        for extra in sorted(set(arguments) - set(names)):
            errors.setdefault(str(extra), []).append(f"The {extra} argument is not declared.")
        values = [arguments.get(n, _MISSING) for n in names]
    else:
        if len(arguments) > len(params):
            errors.setdefault("arguments", []).append(
                f"Expected at most {len(params)} arguments, got {len(arguments)}."
            )
        values = list(arguments) + [_MISSING] * (len(params) - len(arguments))
    ordered: list[Any] = []
    for param, value in zip(params, values, strict=False):
        name = param["name"]
        if value is _MISSING:
            if param["required"]:
                errors.setdefault(name, []).append(f"The {name} argument is required.")
            else:
                ordered.append(None)  # keep later parameters in their positions
            continue
        if value is None:
            if not param["allows_null"]:
                errors.setdefault(name, []).append(f"The {name} argument cannot be null.")
        elif not _is(value, param["type"]):
            errors.setdefault(name, []).append(
                f"The {name} argument must be of type {param['type']}."
            )
        ordered.append(value)
    if errors:
        raise ArgumentsInvalid(errors)
    return ordered


def _is(value: Any, kind: str) -> bool:
    allowed = _TYPES[kind]
    if kind in ("int", "integer", "float", "number") and isinstance(value, bool):
        return False
    return isinstance(value, allowed)


def bind_signature(method: Callable[..., Any], arguments: Any) -> list[Any]:
    """Bind arguments to a method's signature (minus ``self``); returns positional values."""
    signature = inspect.signature(method)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    signature = signature.replace(parameters=params)
    try:
        if isinstance(arguments, Mapping):
            bound = signature.bind(**arguments)
        else:
            bound = signature.bind(*arguments)
    except TypeError as exc:
        raise ArgumentsInvalid({"arguments": [str(exc)]}) from None
    bound.apply_defaults()
    values: list[Any] = []
    for param in params:
        value = bound.arguments.get(param.name)
        if param.kind is param.VAR_POSITIONAL:
            values.extend(value or ())
        elif param.kind is param.VAR_KEYWORD:
            if value:
                raise ArgumentsInvalid({"arguments": ["keyword-only extras are not supported"]})
        else:
            values.append(value)
    return values


def signal_value(arguments: list[Any]) -> Any:
    """What a signal wait returns: True for no arguments, the value for one, else the list."""
    if not arguments:
        return True
    if len(arguments) == 1:
        return arguments[0]
    return list(arguments)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
