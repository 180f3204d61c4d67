"""How checkpointed values become text and back."""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable


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
    """JSON with sorted keys and no NaN/Infinity. A tuple comes back as a list."""

    renders_json = True

    def encode(self, value: object) -> str:
        return _ENCODE(value)

    def decode(self, text: str) -> object:
        return json.loads(text)


def renders_json(codec: CheckpointCodec) -> bool:
    """Whether ``codec`` promises JSON text (required by stores with a ``jsonb`` column)."""
    return bool(getattr(codec, "renders_json", False))


__all__ = ["CheckpointCodec", "JsonCodec", "renders_json"]
