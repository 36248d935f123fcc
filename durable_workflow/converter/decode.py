"""Plain codec values back to Python values, shaped by the receiver's declared type.

Tagged maps become their standard-library values whatever is declared. A class
needed to rebuild a value (a dataclass, an enum, a named tuple, a pydantic
model, a Django model, a registered type) comes only from the declared type
(``hint``) or from a converter the application registered: nothing in a payload
is ever imported. Without a declared class, records decode to dicts of their
fields and enum members to their values. A plain value meets a richer declared
type leniently (ISO text for a datetime, a list for a tuple, a dict for a
dataclass), which is how JSON from webhooks reaches typed handlers. Declared
builtins (str, int, list, dict...) never reject what older code stored.
"""

from __future__ import annotations

import collections.abc as abc
import enum
import types
import typing
from typing import Any, Final

from durable_workflow.converter import custom, scalars
from durable_workflow.converter.hints import Hint, unwrap
from durable_workflow.converter.models import ModelRef, is_model_class, matches
from durable_workflow.converter.paths import Attr, Path, child, located_error
from durable_workflow.converter.scalars import TAG, Refused
from durable_workflow.exceptions import PayloadCodecError

#: Who receives the value: a workflow body may not query, so models stay identifiers there.
WORKFLOW: Final = "workflow"
ACTIVITY: Final = "activity"
CLIENT: Final = "client"

_RECORD_TAGS: Final = frozenset({"dataclass", "namedtuple", "pydantic"})
_ITEM_TAGS: Final = {"tuple": tuple, "set": set, "frozenset": frozenset}
#: Keys each tag may carry (beyond "$dw"): a map with any other key is a plain map.
_SHAPES: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "datetime": (frozenset({"value"}), frozenset({"zone", "fold"})),
    "time": (frozenset({"value"}), frozenset({"fold"})),
    "date": (frozenset({"value"}), frozenset()),
    "timedelta": (frozenset({"days", "seconds", "microseconds"}), frozenset()),
    "decimal": (frozenset({"value"}), frozenset()),
    "uuid": (frozenset({"value"}), frozenset()),
    "int": (frozenset({"value"}), frozenset()),
    "bytes": (frozenset({"base64"}), frozenset()),
    "bytearray": (frozenset({"value"}), frozenset()),
    "tuple": (frozenset({"items"}), frozenset()),
    "set": (frozenset({"items"}), frozenset()),
    "frozenset": (frozenset({"items"}), frozenset()),
    "dict": (frozenset({"items"}), frozenset()),
    "enum": (frozenset({"value"}), frozenset()),
    "dataclass": (frozenset({"fields"}), frozenset()),
    "namedtuple": (frozenset({"fields"}), frozenset()),
    "pydantic": (frozenset({"fields"}), frozenset()),
    "model": (frozenset({"app_label", "model", "pk", "db"}), frozenset()),
    "custom": (frozenset({"name", "value"}), frozenset()),
}
_PLAIN_HINTS: Final = frozenset({str, int, float, bool, bytes, list, dict, type(None)})


def tag_of(value: dict[str, Any]) -> str | None:
    """The tag of a well-formed tagged map, else None (an ordinary map)."""
    tag = value.get(TAG)
    shape = _SHAPES.get(tag) if isinstance(tag, str) else None
    if shape is None:
        return None
    keys = value.keys() - {TAG}
    required, optional = shape
    return tag if required <= keys and keys <= required | optional else None


class _Decoder:
    __slots__ = ("receiver", "root")

    def __init__(self, root: str, receiver: str) -> None:
        self.root = root
        self.receiver = receiver

    def mismatch(self, path: Path, problem: str, advice: str = "") -> Exception:
        return located_error("value_type_mismatch", self.root, path, problem, advice)

    # ------------------------------------------------------------ dispatch
    def value(self, value: Any, hint: Hint, path: Path) -> Any:
        hint = unwrap(hint)
        if hint is None or hint in _PLAIN_HINTS:
            if not isinstance(value, list | dict):
                return value
            decoded = self.untyped(value, path)
            if hint is list and isinstance(decoded, tuple | set | frozenset):
                return list(decoded)
            return decoded
        origin = _origin(hint)
        if origin is typing.Union or origin is types.UnionType:
            return self.union(value, typing.get_args(hint), path)
        try:
            return self.typed(value, hint, origin, path)
        except Refused as refused:
            raise self.mismatch(path, refused.problem, refused.advice) from None

    def untyped(self, value: Any, path: Path) -> Any:
        """Tags decoded, records as dicts, everything else as stored (uncopied if unchanged)."""
        if isinstance(value, list):
            out = value
            for index, item in enumerate(value):
                if isinstance(item, list | dict):
                    decoded = self.untyped(item, child(path, index))
                    if decoded is not item:
                        if out is value:
                            out = list(value)
                        out[index] = decoded
            return out
        if isinstance(value, dict):
            tag = tag_of(value) if TAG in value else None
            if tag is not None:
                try:
                    return self.tagged(value, tag, None, path)
                except Refused as refused:
                    raise self.mismatch(path, refused.problem, refused.advice) from None
            out_map = value
            for key, item in value.items():
                if isinstance(item, list | dict):
                    decoded = self.untyped(item, child(path, key))
                    if decoded is not item:
                        if out_map is value:
                            out_map = dict(value)
                        out_map[key] = decoded
            return out_map
        return value

    def union(self, value: Any, members: tuple[Any, ...], path: Path) -> Any:
        if value is None and type(None) in members:
            return None
        for member in members:
            if member is type(None):
                continue
            plain = unwrap(member)
            if plain in _PLAIN_HINTS:
                decoded = self.untyped(value, path)
                if isinstance(decoded, plain):
                    return decoded
                continue
            try:
                return self.value(value, member, path)
            except PayloadCodecError:
                continue
        return self.untyped(value, path)

    def typed(self, value: Any, hint: Hint, origin: Any, path: Path) -> Any:
        if isinstance(value, dict) and TAG in value:
            tag = tag_of(value)
            if tag is not None:
                return self.tagged(value, tag, hint, path)
        cls = origin or hint
        if not isinstance(cls, type):
            return self.untyped(value, path)
        converter = custom.for_class(cls)
        if converter is not None:
            return converter.decode(self.untyped(value, path), cls)
        return self.from_plain(value, hint, cls, path)

    # --------------------------------------------------------------- tags
    def tagged(self, value: dict[str, Any], tag: str, hint: Hint, path: Path) -> Any:
        decoder = scalars.DECODERS.get(tag)
        if decoder is not None:
            return self.fit(decoder(value), hint, path)
        if tag in _ITEM_TAGS:
            items = value["items"]
            if not isinstance(items, list):
                raise Refused(f"a stored {tag} has no list of items")
            return self.collection(items, hint, _ITEM_TAGS[tag], path)
        if tag == "dict":
            return self.pairs(value["items"], hint, path)
        if tag == "bytearray":
            data = self.untyped(value["value"], path)
            if not isinstance(data, bytes):
                raise Refused("a stored bytearray holds no bytes")
            return self.fit(bytearray(data), hint, path)
        if tag == "enum":
            return self.enum_member(value["value"], hint, path)
        if tag in _RECORD_TAGS:
            return self.record(value["fields"], hint, path)
        if tag == "model":
            return self.model(value, hint, path)
        return self.custom_value(value, hint, path)

    def fit(self, value: Any, hint: Hint, path: Path) -> Any:
        """A decoded value against its declared type (only a class is checked)."""
        cls = _origin(hint) or hint
        if hint is None or not isinstance(cls, type) or isinstance(value, cls):
            return value
        if cls is float and type(value) is int:
            return float(value)
        raise Refused(
            f"the stored {type(value).__qualname__} does not fit the declared {_name(hint)}",
            "declare the type the sender passes, or convert it before sending",
        )

    def collection(self, items: list[Any], hint: Hint, default: type, path: Path) -> Any:
        origin = _origin(hint) or hint
        args = typing.get_args(hint)
        target = _COLLECTIONS.get(origin, default) if hint is not None else default
        if target is tuple:
            if (len(args) == 2 and args[1] is Ellipsis) or not args:
                element = args[0] if args else None
                return tuple(self.value(v, element, child(path, i)) for i, v in enumerate(items))
            if len(args) != len(items):
                raise Refused(f"{len(items)} items do not fit {_name(hint)}")
            return tuple(
                self.value(v, h, child(path, i))
                for i, (v, h) in enumerate(zip(items, args, strict=True))
            )
        if hint is not None and origin not in _COLLECTIONS:
            return self.fit(self.collection(items, None, default, path), hint, path)
        element = args[0] if args else None
        decoded = [self.value(v, element, child(path, i)) for i, v in enumerate(items)]
        try:
            return target(decoded)
        except TypeError:  # e.g. a stored set holding lists
            raise Refused(f"the stored items cannot form a {target.__qualname__}") from None

    def pairs(self, items: Any, hint: Hint, path: Path) -> dict[Any, Any]:
        if not isinstance(items, list) or not all(
            isinstance(pair, list) and len(pair) == 2 for pair in items
        ):
            raise Refused("a stored dict has no list of [key, value] pairs")
        key_hint, value_hint = _mapping_args(hint)
        out: dict[Any, Any] = {}
        for index, (key, item) in enumerate(items):
            where = child(path, index)
            decoded_key = self.value(key, key_hint, where)
            if not isinstance(decoded_key, abc.Hashable):
                raise Refused(f"the stored key {decoded_key!r} cannot be a dict key")
            out[decoded_key] = self.value(item, value_hint, child(path, decoded_key))
        return out

    def enum_member(self, stored: Any, hint: Hint, path: Path) -> Any:
        plain = self.untyped(stored, path)
        cls = _origin(hint) or hint
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            try:
                return cls(plain)
            except ValueError:
                raise Refused(f"{plain!r} is not a member of {cls.__qualname__}") from None
        return plain if hint is None else self.fit(plain, hint, path)

    def record(self, fields: Any, hint: Hint, path: Path) -> Any:
        if not isinstance(fields, dict):
            raise Refused("a stored record has no map of fields")
        if hint is None:
            return self.untyped(fields, path)
        cls = _origin(hint) or hint
        if cls in (dict, abc.Mapping, abc.MutableMapping) or not isinstance(cls, type):
            return self.untyped(fields, path)
        return self.from_plain(fields, hint, cls, path)

    def model(self, value: dict[str, Any], hint: Hint, path: Path) -> Any:
        if not all(isinstance(value[key], str) for key in ("app_label", "model", "db")):
            raise Refused("a stored model identifier needs text app_label, model and db")
        pk = self.untyped(value["pk"], child(path, Attr("pk")))
        ref: ModelRef[Any] = ModelRef(value["app_label"], value["model"], pk, value["db"])
        cls = _origin(hint) or hint
        declared = typing.get_args(hint)[0] if cls is ModelRef and typing.get_args(hint) else None
        if is_model_class(cls):
            declared = cls
        if declared is not None and is_model_class(declared) and not matches(ref, declared):
            raise Refused(f"the stored {ref.label} is not a {declared._meta.label}")
        if not is_model_class(cls):
            return ref if hint is None or cls is ModelRef else self.fit(ref, hint, path)
        if self.receiver == WORKFLOW:
            raise Refused(
                f"a workflow body cannot receive a {cls.__qualname__} row (bodies must not query)",
                f"declare ModelRef[{cls.__qualname__}] and read the row in an activity",
            )
        return ref.fetch(cls)

    def custom_value(self, value: dict[str, Any], hint: Hint, path: Path) -> Any:
        name = value["name"]
        registered = custom.by_name(name) if isinstance(name, str) else None
        cls = _origin(hint) or hint
        declared = custom.for_class(cls) if isinstance(cls, type) else None
        if declared is not None:
            if registered is not declared:
                raise Refused(f"the stored {name!r} value is not a {cls.__qualname__}")
            return declared.decode(self.untyped(value["value"], path), cls)
        if registered is None:
            raise Refused(
                f"no converter named {name!r} is registered in this process",
                "register it (durable_workflow.register_converter) where workers start",
            )
        return self.fit(
            registered.decode(self.untyped(value["value"], path), registered.cls), hint, path
        )

    # ------------------------------------------------- plain to declared
    def from_plain(self, value: Any, hint: Hint, cls: type, path: Path) -> Any:
        from durable_workflow.converter import records

        if cls in _COLLECTIONS:
            if isinstance(value, list):
                return self.collection(value, hint, _COLLECTIONS[cls], path)
            raise Refused(f"a {type(value).__qualname__} cannot be read as {_name(hint)}")
        if cls in _MAPPINGS:
            if not isinstance(value, dict):
                raise Refused(f"a {type(value).__qualname__} cannot be read as {_name(hint)}")
            key_hint, value_hint = _mapping_args(hint)
            return {
                self.value(k, key_hint, path): self.value(v, value_hint, child(path, k))
                for k, v in value.items()
            }
        if issubclass(cls, enum.Enum):
            return self.enum_member(value, cls, path)
        if cls in scalars.ENCODERS:
            return scalars.from_text(cls, value)
        if cls is bytearray and isinstance(value, bytes):
            return bytearray(value)
        if is_model_class(cls) or cls is ModelRef:
            raise Refused(f"a {type(value).__qualname__} is not a model identifier")
        built = records.build(self, value, cls, path)
        if built is not records.NOT_A_RECORD:
            return built
        return self.fit(self.untyped(value, path), cls, path)


_COLLECTIONS: Final[dict[Any, type]] = {
    list: list,
    tuple: tuple,
    set: set,
    frozenset: frozenset,
    abc.Sequence: list,
    abc.MutableSequence: list,
    abc.Iterable: list,
    abc.Collection: list,
    abc.Set: set,
    abc.MutableSet: set,
}
_MAPPINGS: Final = frozenset({dict, abc.Mapping, abc.MutableMapping})


def _mapping_args(hint: Hint) -> tuple[Hint, Hint]:
    args = typing.get_args(hint) if (_origin(hint) or hint) in _MAPPINGS else ()
    return (args[0], args[1]) if len(args) == 2 else (None, None)


def _origin(hint: Hint) -> Any:
    """``typing.get_origin``, typed loosely: a hint here may be anything."""
    return typing.get_origin(hint)


def _name(hint: Hint) -> str:
    return hint.__qualname__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def from_plain(
    value: Any, hint: Hint = None, root: str = "value", *, receiver: str = CLIENT
) -> Any:
    """Decode one plain value into ``hint`` (None: no declared type)."""
    return _Decoder(root, receiver).value(value, hint, None)


def arguments_from_plain(values: Any, hints: Any, *, receiver: str) -> list[Any]:
    """Positional arguments, each into the hint of its parameter (``hints.argument(i)``)."""
    if not isinstance(values, list):
        return [] if values is None else [values]
    return [
        _Decoder(f"argument {index + 1}", receiver).value(value, hints.argument(index), None)
        for index, value in enumerate(values)
    ]
