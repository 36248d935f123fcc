"""Python values to the plain values the payload codec carries.

Plain values (None, bool, int in the 64-bit range, finite float, str, bytes,
lists, and dicts with str keys) pass through unchanged and uncopied. Every
other supported value becomes a tagged map ``{"$dw": <tag>, ...}``; a plain dict
that itself holds the ``"$dw"`` key is tagged too, so no stored map is ever
mistaken for a tag. Anything else is refused with the path to the value, its
type, and what to pass instead.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Sequence
from typing import Any, Final

from durable_workflow.converter import custom, scalars
from durable_workflow.converter.models import ModelRef, is_model_instance
from durable_workflow.converter.paths import Attr, Path, child, located_error, type_name
from durable_workflow.converter.scalars import TAG, Refused

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
MAX_DEPTH: Final = 128

_BUILTIN_BASES: Final = (str, int, float, dict, list, bytes)


class _Encoder:
    __slots__ = ("binary", "root")

    def __init__(self, root: str | int, binary: bool) -> None:
        self.root = root  # a name, or the 1-based number of an argument
        self.binary = binary

    def refuse(self, path: Path, value: Any, problem: str, advice: str = "") -> Exception:
        root = f"argument {self.root}" if isinstance(self.root, int) else self.root
        return located_error("unsupported_value_type", root, path, problem, advice, value=value)

    def walk(self, value: Any, path: Path, depth: int) -> Any:
        cls = value.__class__
        if cls is str:
            if not value.isascii():
                try:
                    value.encode()
                except UnicodeEncodeError:
                    raise self.refuse(
                        path,
                        value,
                        "text with a lone surrogate is not valid UTF-8",
                        "pass text that encodes as UTF-8, or bytes",
                    ) from None
            return value
        if cls is int:
            if INT64_MIN <= value <= INT64_MAX:
                return value
            return scalars.encode_big_int(value)
        if cls is bool or value is None:
            return value
        if cls is float:
            if value - value != 0.0:  # NaN and the infinities
                raise self.refuse(
                    path,
                    value,
                    f"{value!r} is not a finite number",
                    "use None for a missing number, or a Decimal",
                )
            return value
        if cls is list or cls is dict:
            if depth >= MAX_DEPTH:
                raise self.refuse(
                    path,
                    value,
                    f"nesting deeper than {MAX_DEPTH} levels (or a cycle)",
                    "flatten the value or break the cycle",
                )
            return (
                self.walk_list(value, path, depth)
                if cls is list
                else self.walk_dict(value, path, depth)
            )
        if cls is bytes:
            return value if self.binary else scalars.encode_bytes_as_text(value)
        return self.walk_other(value, path, depth)

    def walk_list(self, value: list[Any], path: Path, depth: int) -> list[Any]:
        out = value
        for index, item in enumerate(value):
            converted = self.walk(item, child(path, index), depth + 1)
            if converted is not item:
                if out is value:
                    out = list(value)
                out[index] = converted
        return out

    def walk_dict(self, value: dict[Any, Any], path: Path, depth: int) -> Any:
        if TAG in value:
            return self.pairs(value, path, depth)
        out = value
        for key, item in value.items():
            if key.__class__ is not str:
                return self.pairs(value, path, depth)
            converted = self.walk(item, child(path, key), depth + 1)
            if converted is not item:
                if out is value:
                    out = dict(value)
                out[key] = converted
        return out

    def pairs(self, value: dict[Any, Any], path: Path, depth: int) -> dict[str, Any]:
        """A dict with non-str keys (or a "$dw" key): a list of [key, value] pairs."""
        items = []
        for index, (key, item) in enumerate(value.items()):
            where = child(path, key if isinstance(key, str | int) else index)
            items.append([self.walk(key, where, depth + 2), self.walk(item, where, depth + 2)])
        return {TAG: "dict", "items": items}

    def items(self, tag: str, values: Any, path: Path, depth: int) -> dict[str, Any]:
        return {TAG: tag, "items": self.walk_list(list(values), path, depth)}

    def fields(self, tag: str, fields: dict[str, Any], path: Path, depth: int) -> dict[str, Any]:
        out = {}
        for name, item in fields.items():
            out[name] = self.walk(item, child(path, Attr(name)), depth + 1)
        return {TAG: tag, "fields": out}

    def walk_other(self, value: Any, path: Path, depth: int) -> Any:
        if depth >= MAX_DEPTH:
            raise self.refuse(path, value, f"nesting deeper than {MAX_DEPTH} levels (or a cycle)")
        cls = value.__class__
        converter = custom.for_class(cls)
        try:
            if converter is not None:
                data = self.walk(converter.encode(value), path, depth + 1)
                return {TAG: "custom", "name": converter.name, "value": data}
            if isinstance(value, enum.Enum):
                return {TAG: "enum", "value": self.walk(value.value, path, depth + 1)}
            for base in cls.__mro__:
                encoder = scalars.ENCODERS.get(base)
                if encoder is not None:
                    return encoder(value)
        except Refused as refused:
            raise self.refuse(path, value, refused.problem, refused.advice) from None
        return self.walk_structured(value, path, depth)

    def walk_structured(self, value: Any, path: Path, depth: int) -> Any:
        if isinstance(value, tuple):
            names = getattr(value, "_fields", None)
            if isinstance(names, tuple):  # a NamedTuple
                return self.fields("namedtuple", dict(zip(names, value, strict=True)), path, depth)
            return self.items("tuple", value, path, depth)
        if isinstance(value, set | frozenset):
            tag = "frozenset" if isinstance(value, frozenset) else "set"
            return {TAG: tag, "items": self.sorted_items(value, path, depth)}
        if isinstance(value, bytearray):
            return {TAG: "bytearray", "value": self.walk(bytes(value), path, depth + 1)}
        if isinstance(value, ModelRef):  # before dataclasses: a ModelRef is one
            return self.ref(value, path, depth)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return self.fields("dataclass", fields, path, depth)
        if _is_pydantic_model(value):
            dumped = value.model_dump(mode="python", by_alias=True)
            return self.fields("pydantic", dumped, path, depth)
        if is_model_instance(value):
            return self.model(value, path, depth)
        for base in _BUILTIN_BASES:  # e.g. a str subclass or an OrderedDict: stored as the base
            if isinstance(value, base):
                as_base: Any = base
                return self.walk(as_base(value), path, depth)
        raise self.refuse(
            path, value, f"{type_name(value)} is not a value that can be stored", _advice(value)
        )

    def sorted_items(self, value: set[Any] | frozenset[Any], path: Path, depth: int) -> list[Any]:
        """Set members in a stable order (hash order changes between processes)."""
        from durable_workflow.codec import avro

        items = self.walk_list(list(value), path, depth)
        try:
            return sorted(items, key=avro.encode_frame)
        except Exception:
            return items

    def model(self, value: Any, path: Path, depth: int) -> dict[str, Any]:
        try:
            ref = ModelRef.of(value)
        except ValueError as exc:
            raise self.refuse(path, value, str(exc), "save the instance first") from None
        return self.ref(ref, path, depth)

    def ref(self, ref: ModelRef[Any], path: Path, depth: int) -> dict[str, Any]:
        return {
            TAG: "model",
            "app_label": ref.app_label,
            "model": ref.model_name,
            "pk": self.walk(ref.pk, child(path, Attr("pk")), depth + 1),
            "db": ref.using,
        }


def _is_pydantic_model(value: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def _advice(value: Any) -> str:
    if callable(value):
        return "pass data, not a function or class; name what to call with a str"
    if hasattr(value, "__iter__") or hasattr(value, "__next__"):
        return "pass a list (or a tuple or set) of the items instead"
    return (
        "make it a dataclass, pass a dict of its fields, or register a converter "
        "with durable_workflow.register_converter()"
    )


def to_plain(value: Any, root: str = "value", *, binary: bool = True) -> Any:
    """``value`` as plain codec values; raises a located ``PayloadCodecError`` when refused.

    ``root`` names the value in messages (``"argument 2"``, ``"result"``);
    ``binary=False`` (the JSON codec) tags bytes as base64 text.
    """
    return _Encoder(root, binary).walk(value, None, 0)


def arguments_to_plain(values: Sequence[Any], *, binary: bool = True) -> list[Any]:
    """Positional arguments as a plain list; paths start at ``argument 1``."""
    encoder = _Encoder(0, binary)
    out = []
    for index, value in enumerate(values, start=1):
        encoder.root = index
        out.append(encoder.walk(value, None, 1))
    return out
