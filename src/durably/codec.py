"""How checkpointed values become text and back."""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable

from durably.validation import storable, storable_json


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


__all__ = ["CheckpointCodec", "JsonCodec", "renders_json"]
