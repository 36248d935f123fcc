"""Records rebuilt from their fields: dataclasses, named tuples, TypedDicts, pydantic models.

Only the declared class is instantiated, through its own constructor (so frozen
dataclasses, defaults and ``__post_init__`` checks behave as in plain Python).
Fields the class no longer has are ignored; fields the payload lacks take their
defaults, which is what lets a record gain a defaulted field while runs are in flight.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import typing
from typing import TYPE_CHECKING, Any, Final

from durable_workflow.converter.paths import Attr, Path, child
from durable_workflow.converter.scalars import Refused

if TYPE_CHECKING:
    from durable_workflow.converter.decode import _Decoder

NOT_A_RECORD: Final = object()


@functools.lru_cache(maxsize=1024)
def field_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def build(decoder: _Decoder, value: Any, cls: Any, path: Path) -> Any:
    """``value`` as an instance of the record class ``cls``, or NOT_A_RECORD."""
    if dataclasses.is_dataclass(cls):
        return _dataclass(decoder, _fields_of(value, cls), cls, path)
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return _named_tuple(decoder, value, cls, path)
    if typing.is_typeddict(cls):
        fields = _fields_of(value, cls)
        hints = field_hints(cls)
        return {
            key: decoder.value(item, hints.get(key), child(path, key))
            for key, item in fields.items()
        }
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and issubclass(cls, pydantic.BaseModel):
        try:
            return cls.model_validate(decoder.untyped(_fields_of(value, cls), path))
        except pydantic.ValidationError as exc:
            raise Refused(f"{cls.__qualname__} rejected the stored fields: {exc}") from None
    return NOT_A_RECORD


def _fields_of(value: Any, cls: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refused(f"a {type(value).__qualname__} cannot be read as {cls.__qualname__}")
    return value


def _construct(cls: type, kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise Refused(f"{cls.__qualname__}(...) refused the stored fields: {exc}") from None


def _dataclass(decoder: _Decoder, fields: dict[str, Any], cls: Any, path: Path) -> Any:
    hints = field_hints(cls)
    init: dict[str, Any] = {}
    later: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name not in fields:
            continue
        value = decoder.value(
            fields[field.name], hints.get(field.name), child(path, Attr(field.name))
        )
        (init if field.init else later)[field.name] = value
    instance = _construct(cls, init)
    for name, value in later.items():  # init=False fields, restored as they were
        object.__setattr__(instance, name, value)
    return instance


def _named_tuple(decoder: _Decoder, value: Any, cls: type, path: Path) -> Any:
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    hints = field_hints(cls)
    if isinstance(value, list | tuple):
        if len(value) > len(names):
            raise Refused(f"{len(value)} items do not fit {cls.__qualname__}")
        value = dict(zip(names, value, strict=False))
    fields = _fields_of(value, cls)
    return _construct(
        cls,
        {
            name: decoder.value(fields[name], hints.get(name), child(path, Attr(name)))
            for name in names
            if name in fields
        },
    )
