"""What registration warns of in an annotation: values that would not come back as given.

A value typed ``Any``, ``object`` or a container without item types comes back as plain
JSON; a pydantic model keeps its ``bytes`` as UTF-8 text by default (other bytes fail
after the step that made them ran) and writes a ``set`` field in the order it iterates in,
which differs between processes. Each is a `ValueTypeWarning` naming the function, the
parameter and the type, given where the user's code registered it.
"""

from __future__ import annotations

import collections.abc
import os
import sys
import typing
import warnings
from typing import Any

from pydantic_core import CoreSchema

from durably.errors import ValueTypeWarning

_CONTAINERS = (
    dict,
    list,
    set,
    frozenset,
    tuple,
    collections.abc.Mapping,
    collections.abc.MutableMapping,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
    collections.abc.Iterable,
    collections.abc.Collection,
)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The durably package's directory: frames in it are not the user's."""


def loose_part(annotation: object) -> str | None:
    """The part of ``annotation`` that gives no type, as written; None if there is none.

    ``Any``, ``object``, or a container without item types (``dict``, ``typing.List``),
    looked for through unions, ``Annotated`` and containers' item types (not into classes:
    a model's fields are its own).
    """
    if annotation is Any or annotation is object:
        return _written(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in _CONTAINERS or (
        origin in _CONTAINERS and not args and annotation != tuple[()]
    ):
        return _written(annotation)
    if origin is typing.Annotated:
        return loose_part(args[0])
    for arg in args:
        if arg is not Ellipsis:
            found = loose_part(arg)
            if found is not None:
                return found
    return None


def _written(annotation: object) -> str:
    """``annotation`` as its code spells it (``dict``, ``list[Any]``)."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


def model_concerns(schema: CoreSchema) -> list[str]:
    """What in the pydantic models of ``schema`` does not round-trip, one line each.

    A ``bytes`` field the model keeps as UTF-8 text (its default ``ser_json_bytes``), and
    a ``set`` or ``frozenset`` field.
    """
    found: list[str] = []
    _look(schema, None, None, found, set())
    return found


def _look(
    node: Any, model: str | None, field: str | None, found: list[str], seen: set[int]
) -> None:
    """Walk ``node`` (part of a core schema) inside model ``model``'s field ``field``."""
    if isinstance(node, list):
        for item in node:
            _look(item, model, field, found, seen)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("model", "dataclass") and "cls" in node:
        if id(node) in seen:
            return
        seen.add(id(node))
        cls = node["cls"]
        config = node.get("config") or {}
        if "__pydantic_complete__" in cls.__dict__:  # a pydantic model or dataclass
            name = cls.__name__
            _fields(node.get("schema"), name, config, found, seen)
            return
    if model is not None and field is not None and kind in ("set", "frozenset"):
        found.append(
            f"field {field!r} of {model} is a {kind}, which the model writes in the "
            "order it iterates in (for strings, different in every process): a step "
            "argument holding it parks its workflow on another worker (use a sorted "
            "list)"
        )
    for key, value in node.items():
        if key not in ("metadata", "cls", "config", "default", "expected"):
            _look(value, model, field, found, seen)


def _fields(
    schema: Any, model: str, config: dict[str, Any], found: list[str], seen: set[int]
) -> None:
    """Look at each field of ``model`` (its fields' ``schema``)."""
    if not isinstance(schema, dict):
        return
    fields = schema.get("fields")
    items = (
        fields.items()
        if isinstance(fields, dict)
        else ((f.get("name"), f) for f in fields or () if isinstance(f, dict))
    )
    text = config.get("ser_json_bytes", "utf8") == "utf8"
    for name, field in items:
        if text and _holds_bytes(field):
            found.append(
                f"field {name!r} of {model} is bytes, which the model keeps as UTF-8 text "
                "(other bytes fail after the step ran): give it model_config = "
                "ConfigDict(ser_json_bytes='base64', val_json_bytes='base64')"
            )
        _look(field, model, str(name), found, seen)


def _holds_bytes(node: Any) -> bool:
    """Whether ``node`` holds a bytes schema outside any nested model."""
    if isinstance(node, list):
        return any(_holds_bytes(item) for item in node)
    if not isinstance(node, dict):
        return False
    if node.get("type") == "bytes" and "serialization" not in node:
        return True
    if node.get("type") in ("model", "dataclass"):
        return False
    return any(
        _holds_bytes(value)
        for key, value in node.items()
        if key not in ("metadata", "cls", "config", "default", "expected")
    )


def warn_of(annotation: object, schema: CoreSchema, what: str) -> None:
    """Warn (`ValueTypeWarning`) of what in ``annotation`` would not come back as given.

    ``what`` names the function and parameter; the warning points at the user's code
    that registered it.
    """
    loose = loose_part(annotation)
    if loose is not None:
        whole = _written(annotation)
        where = f"type {whole}" if whole == loose else f"type {whole} holds {loose}, which"
        _warn(
            f"{what}: {where} gives its values no type: they come back as plain JSON "
            "(strings, lists, dicts), not as what was sent; annotate the type they have (a "
            "model, a dataclass, dict[str, int]), or pydantic.JsonValue for plain JSON"
        )
    for concern in model_concerns(schema):
        _warn(f"{what}: {concern}")


def _warn(message: str) -> None:
    frame = sys._getframe(1)
    level = 2  # `_warn`'s caller's caller, then out of durably
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, ValueTypeWarning, stacklevel=level)


__all__ = ["loose_part", "model_concerns", "warn_of"]
