"""How checkpointed values become text and back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from durably.errors import InvalidInputError
from durably.validation import encodable, storable, storable_json


@runtime_checkable
class CheckpointCodec(Protocol):
    """Turns a step's value into text and back.

    ``decode(encode(v)) == v`` for every value a step returns, and ``encode`` is
    deterministic (equal values give equal text), because stores compare encodings to
    decide whether a write is this pass's own.
    """

    def encode(self, value: object) -> str:
        """Render ``value`` as text; raise `ValueError`/`TypeError` for what it cannot hold."""
        ...

    def decode(self, text: str) -> object:
        """Parse text produced by `encode`."""
        ...


# One encoder for every call (json.dumps with options builds a new one each time).
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


class JsonCodec:
    """JSON with sorted keys and no NaN/Infinity. A tuple comes back as a list.

    ``encode`` refuses (`InvalidInputError`, a `ValueError`) a value holding a string with
    a NUL character or a lone surrogate, which PostgreSQL's ``jsonb`` cannot hold: every
    backing refuses it alike, before any I/O.
    """

    renders_json = True

    def encode(self, value: object) -> str:
        text = _ENCODE(value)
        # The text is ASCII (NUL and surrogates come out escaped): without a backslash it
        # holds nothing jsonb refuses.
        if "\\" not in text:
            return text
        storable_json(text, "value")
        if "\\ud" in text:
            # An escaped pair is a character above U+FFFF, or two surrogate code points the
            # string held as such, which decode would give back as one character: only the
            # value itself tells them apart.
            storable(value, "value")
        return text

    def decode(self, text: str) -> object:
        return json.loads(text)


def renders_json(codec: CheckpointCodec) -> bool:
    """Whether ``codec`` promises JSON text (required by stores with a ``jsonb`` column)."""
    return bool(getattr(codec, "renders_json", False))


def screened_encode(codec: CheckpointCodec) -> Callable[[object], str]:
    """``codec.encode``, refusing before any I/O (`InvalidInputError`) text a store cannot
    keep: not a string, or not valid Unicode (a lone surrogate has no UTF-8 encoding); for
    a codec rendering JSON, also what ``jsonb`` refuses (a NUL, raw or escaped, or an
    escaped lone surrogate), so that such a codec's text is kept alike by every backing.
    `JsonCodec` screens its own output: its ``encode`` comes back as it is. Every store
    encodes checkpointed values through this."""
    if type(codec) is JsonCodec:
        return codec.encode
    screen = storable_json if renders_json(codec) else encodable

    def encode(value: object) -> str:
        text = codec.encode(value)
        if not isinstance(text, str):
            raise InvalidInputError(
                f"{type(codec).__name__}.encode must return text, got {type(text).__name__}"
            )
        return screen(text, "value")

    return encode


__all__ = ["CheckpointCodec", "JsonCodec", "renders_json", "screened_encode"]
