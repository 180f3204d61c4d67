"""How checkpointed values become text and back."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from durably.errors import InvalidInputError, UnreadableRecordError
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


# One encoder and one decoder for every call (json.dumps and json.loads with options
# build a new one each time).
T = TypeVar("T")

_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number (a value holds no NaN or infinity)")


_DECODE = json.JSONDecoder(parse_constant=_refuse_constant).decode

# A JSON string (kept as it is), or a number token that is a negative zero ("-0", "-0.0",
# "-0e5", ...): not followed by what would make it another number.
_STRING_OR_NEGATIVE_ZERO = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # a string
    r"|-(?=0(?:\.0+)?(?:[eE][+-]?\d+)?(?![\d.eE]))"  # the sign of a negative zero
)


def without_negative_zero(text: str) -> str:
    """JSON ``text`` with every negative zero written as zero.

    PostgreSQL's ``jsonb`` holds numbers as ``numeric``, which has no negative zero, and
    the stores compare recorded values by their text: every backing therefore records
    ``-0.0`` as ``0.0`` (equal in Python), so a later ``0.0`` is an equal write on all.
    """
    if "-0" not in text or not _number_may_start(text):
        return text
    return _STRING_OR_NEGATIVE_ZERO.sub(lambda m: "" if m[0] == "-" else m[0], text)


_WHITESPACE = " \t\n\r"
# A "-0" after ":", "," or "[" (whitespace aside), where a JSON value may begin. Linear: no
# two parts of it match the same characters. Without the text's start as an alternative,
# the search skips ahead to those three characters (three times as fast on a long text).
_SIGN_AFTER_VALUE_START = re.compile(r"[:,\[][ \t\n\r]*-0")


def _number_may_start(text: str) -> bool:
    """Whether some ``-0`` in JSON ``text`` stands where a value may begin: at its start or
    after ``:``, ``,`` or ``[``. Only there can it be the sign of a number; a ``-0``
    anywhere else is inside a string (a date, a UUID) or an exponent, and the scan that
    tells strings apart is skipped."""
    return (
        text.lstrip(_WHITESPACE).startswith("-0")
        or _SIGN_AFTER_VALUE_START.search(text) is not None
    )


def unsigned_zeros(value: T) -> T:
    """``value`` (JSON-shaped: dicts, lists, scalars) with every ``-0.0`` as ``0.0``, for
    records stored as JSON, as `without_negative_zero` does for text. Returns ``value``
    itself when it holds no negative zero."""
    if isinstance(value, float):
        negative_zero = value == 0.0 and math.copysign(1.0, value) < 0
        return 0.0 if negative_zero else value  # type: ignore[return-value]
    if isinstance(value, dict):
        changed = {key: unsigned_zeros(item) for key, item in value.items()}
        same = all(changed[key] is item for key, item in value.items())
        return value if same else changed  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        items = [unsigned_zeros(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    return value


class JsonCodec:
    """JSON with sorted keys and no NaN/Infinity. A tuple comes back as a list, and a
    negative zero as zero (`without_negative_zero`).

    ``encode`` refuses (`InvalidInputError`, a `ValueError`) a value holding a string with
    a NUL character or a lone surrogate, which PostgreSQL's ``jsonb`` cannot hold: every
    backing refuses it alike, before any I/O.
    """

    renders_json = True

    def encode(self, value: object) -> str:
        try:
            text = without_negative_zero(_ENCODE(value))
        except RecursionError:
            raise InvalidInputError("value nests too deeply to encode as JSON") from None
        except ValueError as exc:  # NaN or infinity; an int too long to write as text
            raise InvalidInputError(f"value cannot be encoded as JSON: {exc}") from None
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
        """The value ``text`` holds; `ValueError` for text that is not JSON or holds what
        `encode` refuses to write (NaN or an infinite number), an int of more digits than
        Python converts (4,300 by default), and `RecursionError` for JSON nested past
        what Python parses."""
        return _DECODE(text)


def decoded(codec: CheckpointCodec, workflow: str, key: str, stored: str | bytes) -> object:
    """``stored``, the text of ``workflow``'s record ``key`` as a store read it, decoded
    by ``codec``. Raises `UnreadableRecordError` naming both when it cannot be: bytes that
    are not UTF-8 (where a store keeps bytes), or text the codec refuses (not its text,
    NaN, an int or a nesting past what it reads). Every store decodes what it reads
    through this or `decoded_records`."""
    try:
        text = stored.decode() if isinstance(stored, bytes) else stored
        return codec.decode(text)
    except Exception as exc:  # a codec's refusal, whatever its type (RecursionError too)
        raise UnreadableRecordError(
            workflow, {key: why_unreadable(exc)}, _excerpt(stored)
        ) from None


def decoded_records(
    codec: CheckpointCodec,
    workflow: str,
    rows: Sequence[tuple[str | bytes, str | bytes]],
) -> dict[str, object]:
    """Every ``(key, stored text)`` of ``workflow``'s ``rows`` decoded (`decoded`), in
    order. Raises `UnreadableRecordError` naming every record that cannot be read (a key
    that is not UTF-8 included, shown escaped) and holding the others (``readable``)."""
    if rows and isinstance(rows[0][0], str):  # text as usual (a store's bytes: below)
        decode = codec.decode
        try:
            return {key: decode(text) for key, text in rows}  # type: ignore[misc,arg-type]
        except Exception:
            pass  # a record the codec refuses: sorted out below
    readable: dict[str, object] = {}
    unreadable: dict[str, str] = {}
    first = ""
    for raw_key, text in rows:
        key = key_text(raw_key)
        try:
            if not isinstance(raw_key, str):
                raw_key.decode()
            readable[key] = decoded(codec, workflow, key, text)
        except UnicodeDecodeError:
            unreadable[key] = "its key is not UTF-8"
        except UnreadableRecordError as exc:
            unreadable[key] = exc.unreadable[key]
            first = first or exc.stored
    if not unreadable:
        return readable  # the codec refused text it reads now: read the second time
    raise UnreadableRecordError(workflow, unreadable, first, readable)


def key_text(key: str | bytes) -> str:
    """A record's key as text: bytes that are not UTF-8 (a key a store holds as bytes)
    shown with escapes."""
    return key if isinstance(key, str) else key.decode(errors="backslashreplace")


def why_unreadable(exc: Exception) -> str:
    """What a store says of a stored text it could not read, from the error reading it."""
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "it nests deeper than can be read"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


_EXCERPT = 80
"""How much of an unreadable record its error shows."""


def _excerpt(stored: str | bytes) -> str:
    """The start of ``stored``, printable (bytes and control characters escaped)."""
    head = stored[:_EXCERPT]
    shown = ascii(head)[2:-1] if isinstance(head, bytes) else ascii(head)[1:-1]
    return shown + ("…" if len(stored) > _EXCERPT else "")


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
    json_text = renders_json(codec)
    screen = storable_json if json_text else encodable

    def encode(value: object) -> str:
        text = codec.encode(value)
        if not isinstance(text, str):
            raise InvalidInputError(
                f"{type(codec).__name__}.encode must return text, got {type(text).__name__}"
            )
        return screen(without_negative_zero(text) if json_text else text, "value")

    return encode


__all__ = [
    "CheckpointCodec",
    "JsonCodec",
    "decoded",
    "decoded_records",
    "key_text",
    "renders_json",
    "screened_encode",
    "unsigned_zeros",
    "why_unreadable",
    "without_negative_zero",
]
