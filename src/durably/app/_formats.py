"""durably's value format: what it keeps of a value beyond pydantic's own JSON.

Records hold pydantic's JSON rendering of each value (format 1), with two changes since
format 2; every reader takes both formats, so records written before still read:

- ``bytes`` are kept as ``{"$bytes": "<base64>"}`` (standard base64). Format 1 kept them as
  UTF-8 text, which refused any other bytes (an image, a digest, a PDF) after the step
  that made them had run, and PostgreSQL's ``jsonb`` refused a NUL. A string where bytes
  are expected is read as format 1.
- A ``set`` or ``frozenset`` is kept as a list sorted by each item's canonical JSON, so
  equal sets make equal records (and equal argument digests) in every process. It decodes
  to a `RecordedSet` or `RecordedFrozenSet`, which iterates in the recorded order: a body
  fanning out over one calls its steps in the same order in every process. Format 1 kept
  the order the set iterated in, which for strings differs from process to process.

Both apply wherever the annotation itself places the type: at the top, in containers,
unions, tuples, TypedDicts and standard dataclasses. A pydantic model (or pydantic
dataclass) serializes its own fields as its config says.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic_core import CoreSchema, SchemaSerializer, SchemaValidator, core_schema

T = TypeVar("T")

BYTES_TAG = "$bytes"
"""The key of the object format 2 keeps bytes in."""


def _encoder(*, sort_keys: bool) -> Callable[[object], str]:
    # `JSONEncoder.encode` builds the C encoder afresh on every call (about 3 µs of a
    # small value's encoding); this builds it once, with the same settings (so the same
    # text), minus the cycle check: what is encoded is already JSON-ready data, which has
    # no cycles.
    encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    text = json.encoder.encode_basestring
    chunks = make(None, encoder.default, text, None, ":", ",", sort_keys, False, True)
    return lambda data: "".join(chunks(data, 0))


canonical = _encoder(sort_keys=True)
"""The canonical JSON text of JSON-ready data: sorted keys, no spaces, text unescaped."""
compact = _encoder(sort_keys=False)
"""The JSON text of JSON-ready data with its keys in their order, no spaces, text
unescaped."""


def tagged_bytes(value: bytes) -> dict[str, str]:
    """``value`` in format 2: ``{"$bytes": base64}``."""
    return {BYTES_TAG: base64.b64encode(value).decode("ascii")}


def _untagged(data: object) -> object:
    """The bytes a format-2 record holds; anything else as it is.

    A format-1 string becomes bytes as pydantic reads it: as UTF-8.
    """
    if type(data) is dict and len(data) == 1 and BYTES_TAG in data:
        text = data[BYTES_TAG]
        if not isinstance(text, str):
            raise ValueError(f"{BYTES_TAG} holds {type(text).__name__}, not base64 text")
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{BYTES_TAG} holds text that is not base64") from None
    return data


class RecordedSet(set[T]):
    """A set that iterates in the order its record lists it (sorted when written).

    Items added since it was decoded come after the recorded ones, sorted by their repr.
    Everything else is a plain `set`'s.
    """

    __slots__ = ("_order",)

    def __init__(self, items: Iterable[T] = ()) -> None:
        order = list(dict.fromkeys(items))
        super().__init__(order)
        self._order = order

    def __iter__(self) -> Iterator[T]:
        return _in_order(self, self._order, set.__iter__(self))


class RecordedFrozenSet(frozenset[T]):
    """A frozenset that iterates in the order its record lists it (sorted when written)."""

    __slots__ = ("_order",)
    _order: list[T]

    def __new__(cls, items: Iterable[T] = ()) -> RecordedFrozenSet[T]:
        order = list(dict.fromkeys(items))
        made = super().__new__(cls, order)
        made._order = order
        return made

    def __iter__(self) -> Iterator[T]:
        return iter(self._order)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._order,))


def _in_order(items: set[T], order: list[T], own: Iterator[T]) -> Iterator[T]:
    """``items`` in ``order``, then any item not in it (added since) sorted by repr."""
    if len(order) == len(items) and all(item in items for item in order):
        return iter(order)
    kept = [item for item in order if item in items]
    known = set(kept)
    return iter([*kept, *sorted((item for item in own if item not in known), key=repr)])


def _sorted_items(value: Any, serialize: Any, info: core_schema.SerializationInfo) -> Any:
    """A set's items as pydantic serializes them; in JSON, sorted by their canonical text."""
    data = serialize(value)
    if info.mode_is_json() and isinstance(data, list):
        data.sort(key=canonical)
    return data


def _set_schema(schema: dict[str, Any], frozen: bool) -> CoreSchema:
    """A set or frozenset ``schema`` (items converted) validated as a list, in order.

    The items keep the record's order (`RecordedSet`); serialized, they are sorted.
    """
    least, most = schema.get("min_length"), schema.get("max_length")
    kind = RecordedFrozenSet if frozen else RecordedSet
    what = "frozenset" if frozen else "set"

    def made(items: list[Any]) -> Any:
        value = kind(items)
        if least is not None and len(value) < least:
            raise ValueError(f"{what} should have at least {least} items, not {len(value)}")
        if most is not None and len(value) > most:
            raise ValueError(f"{what} should have at most {most} items, not {len(value)}")
        return value

    return core_schema.no_info_after_validator_function(
        made,
        core_schema.list_schema(schema["items_schema"]),
        serialization=core_schema.wrap_serializer_function_ser_schema(
            _sorted_items, schema=schema, info_arg=True
        ),
    )


# Parts of a core schema that hold no schema to convert (values, classes, settings).
_OPAQUE = frozenset({"metadata", "default", "expected", "cls", "config", "ref", "schema_ref"})


def _converted(node: Any, found: list[str]) -> Any:
    """A copy of ``node`` (part of a core schema) with bytes and sets in format 2.

    Appends to ``found`` what it converted.
    """
    if isinstance(node, list):
        return [_converted(item, found) for item in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in ("model", "dataclass") and _prebuilt(node):
        return node  # pydantic serializes it with its own serializer, whatever is here
    copy = {
        key: value if key in _OPAQUE else _converted(value, found) for key, value in node.items()
    }
    if "serialization" in node:
        return copy  # a serializer of the user's own: its say
    if kind == "bytes":
        found.append("bytes")
        return core_schema.no_info_before_validator_function(
            _untagged,
            copy,
            serialization=core_schema.plain_serializer_function_ser_schema(
                tagged_bytes, when_used="json"
            ),
        )
    if kind in ("set", "frozenset"):
        found.append(kind)
        return _set_schema(copy, kind == "frozenset")
    return copy


def _prebuilt(node: dict[str, Any]) -> bool:
    """Whether pydantic uses the class's own validator and serializer for this node.

    So it does for a built model or pydantic dataclass: a copy of its schema changes
    nothing.
    """
    cls = node.get("cls")
    return bool(cls is not None and cls.__dict__.get("__pydantic_complete__", False))


class Converted:
    """A validator and serializer of a core schema in format 2."""

    def __init__(self, schema: CoreSchema, config: core_schema.CoreConfig | None) -> None:
        self.validate = SchemaValidator(schema, config).validate_python
        self._serializer = SchemaSerializer(schema, config)

    def dump(self, value: object) -> object:
        """``value`` (validated) as JSON-ready data in format 2."""
        return self._serializer.to_python(value, mode="json")


def converted(schema: CoreSchema, config: core_schema.CoreConfig | None) -> Converted | None:
    """Return ``schema``'s validator and serializer in format 2.

    None where format 2 changes nothing (no bytes, set or frozenset outside models):
    pydantic's own serve then.
    """
    found: list[str] = []
    changed = _converted(schema, found)
    return Converted(changed, config) if found else None


def prepared(value: object) -> object:
    """Return ``value`` (of no declared type) with its bytes and sets in format 2.

    Wherever plain containers hold them; pydantic renders the rest.
    """
    if isinstance(value, bytes):
        return tagged_bytes(value)
    if isinstance(value, dict):
        return {key: prepared(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [prepared(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((prepared(item) for item in value), key=_loose_key)
    return value


def _loose_key(item: object) -> str:
    try:
        return canonical(item)
    except (TypeError, ValueError):  # not JSON yet (a model, a datetime): pydantic's later
        return repr(item)


__all__ = [
    "BYTES_TAG",
    "Converted",
    "RecordedFrozenSet",
    "RecordedSet",
    "canonical",
    "compact",
    "converted",
    "prepared",
    "tagged_bytes",
]
