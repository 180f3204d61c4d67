"""Checks on arguments, applied before any I/O on every backing."""

from __future__ import annotations

import math
import re
from typing import TypeVar

from durably.errors import InvalidInputError, StatePersistenceError

T = TypeVar("T")

# Text every backing can store holds no NUL (PostgreSQL's text and jsonb refuse it) and is
# valid Unicode: a lone surrogate, which a Python str can hold, has no UTF-8 encoding.
_NUL = "must not contain a NUL character"
_SURROGATE = "must be valid Unicode (no lone surrogate)"
# JSON has no NaN or infinity: a store would keep null (or refuse it only in the datastore).
_NOT_FINITE = "must not hold NaN or an infinite number (JSON has neither)"


MAX_ID_BYTES = 512
"""The longest id or key every backing takes, in UTF-8 bytes: tenants, run, session, item
and workflow ids, dedupe and step keys, queue, namespace and worker names. PostgreSQL
indexes up to three of them in one btree entry, which holds about 2,700 bytes."""


def identifier(value: object, name: str) -> str:
    """Return ``value`` if it is a usable id: a non-empty string without NUL characters
    that is valid Unicode (no lone surrogate), at most `MAX_ID_BYTES` in UTF-8. Raises
    `InvalidInputError` naming it."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInputError(f"{name} must not be empty")
    # Every store call checks its ids: an ASCII id without NUL (the usual one) is settled
    # by two scans in C; any other is looked at as every stored text is (`_text_flaw`).
    ascii_text = value.isascii()
    if "\x00" in value or not ascii_text:
        flaw = _text_flaw(value)
        if flaw is not None:
            raise InvalidInputError(f"{name} {flaw}")
    # A character is 1 to 4 bytes: only a long id is encoded to be counted.
    if (
        len(value) > MAX_ID_BYTES >> 2
        and (len(value) if ascii_text else len(value.encode())) > MAX_ID_BYTES
    ):
        raise InvalidInputError(f"{name} must be at most {MAX_ID_BYTES} bytes in UTF-8")
    return value


def within_size(text: str, limit: int, what: str, store: str) -> str:
    """``text`` if its UTF-8 form fits in ``limit`` bytes (a store's ``max_value_bytes``),
    checked before anything is sent; else `StatePersistenceError` from ``store`` with
    reason ``too_large``. A character takes at most 4 bytes, so only a long text is encoded
    to be counted (the hot writes are short)."""
    if len(text) > limit >> 2 and (size := len(text.encode())) > limit:
        raise StatePersistenceError(
            store, "too_large", f"{what} of {size} bytes exceeds max_value_bytes={limit}"
        )
    return text


MAX_INT_DIGITS = 4300
"""The most decimal digits of an int a stored value may hold: Python's default limit for
turning an int into text and back (`sys.get_int_max_str_digits`), which every process
reading the value applies. A longer int is refused when written, as it could not be read."""

INT_BOUND = 10**MAX_INT_DIGITS
"""Every int a value may hold is strictly between `INT_FLOOR` and ``INT_BOUND``."""
INT_FLOOR = -INT_BOUND
"""``-INT_BOUND``, made once (negating it is as slow as copying 1,800 bytes)."""


MAX_DEPTH = 64
"""How deeply a stored JSON value (a record's metadata, a tool call's arguments) may nest:
64 dicts or lists inside one another. Deeper values are refused when written, because a
reader (pydantic's JSON parser stops near 200 levels, Python's near 1,000) could not read
them back."""

_TOO_DEEP = f"must not nest dicts and lists more than {MAX_DEPTH} levels deep"


def storable(value: T, name: str) -> T:
    """Return ``value`` (a string, or a JSON-shaped value of dicts, lists and tuples) if
    every string in it, dict keys included, is text every backing can store: no NUL
    character and no lone surrogate; every float in it is finite (JSON has no NaN or
    infinity); and it nests at most `MAX_DEPTH` dicts and lists deep. Raises
    `InvalidInputError` naming it."""
    flaw = _flaw(value, 0)
    if flaw is not None:
        raise InvalidInputError(f"{name} {flaw}")
    return value


def storable_json(text: str, name: str) -> str:
    """Return ``text``, JSON a codec rendered, if PostgreSQL's ``jsonb`` (and so every
    backing) can hold it: no NUL and no lone surrogate, raw or as a ``\\u`` escape (an
    escaped high surrogate must be followed at once by an escaped low one). Raises
    `InvalidInputError` naming it."""
    flaw = _text_flaw(text)
    if flaw is None and "\\" in text and _CANDIDATE.search(text) is not None:
        flaw = _escape_flaw(text)
    if flaw is not None:
        raise InvalidInputError(f"{name} {flaw}")
    return text


def encodable(text: str, name: str) -> str:
    """Return ``text`` if it has a UTF-8 encoding (no lone surrogate), as every backing
    needs to send or store it. Raises `InvalidInputError` naming it."""
    if _unencodable(text):
        raise InvalidInputError(f"{name} {_SURROGATE}")
    return text


def _unencodable(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _text_flaw(text: str) -> str | None:
    if "\x00" in text:
        return _NUL
    return _SURROGATE if _unencodable(text) else None


def _flaw(value: object, depth: int) -> str | None:
    # ``depth``: how many dicts and lists hold ``value``.
    if isinstance(value, str):
        return _text_flaw(value)
    if isinstance(value, float):
        return None if math.isfinite(value) else _NOT_FINITE
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return _TOO_DEEP
        for key, item in value.items():
            flaw = _text_flaw(key) if isinstance(key, str) else None
            if flaw is not None or (flaw := _flaw(item, depth + 1)) is not None:
                return flaw
    elif isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return _TOO_DEEP
        for item in value:
            if (flaw := _flaw(item, depth + 1)) is not None:
                return flaw
    return None


# Where an escape jsonb refuses may start: \u0000 or a surrogate (D800-DFFF).
_CANDIDATE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# Escapes read left to right, so that a backslash after an escaped one starts afresh: an
# escaped backslash, a surrogate pair (both fine), or, in group 1, NUL or a lone surrogate.
_ESCAPE = re.compile(
    r"\\(?:\\|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|u(0000|[dD][89a-fA-F][0-9a-fA-F]{2}))"
)


def _escape_flaw(text: str) -> str | None:
    for match in _ESCAPE.finditer(text):
        code = match[1]
        if code is not None:
            return _NUL if code == "0000" else _SURROGATE
    return None


def positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is an int of at least 1 (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return value


def non_negative_int(value: object, name: str) -> int:
    """Return ``value`` if it is an int of 0 or more (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def positive(value: float, name: str) -> float:
    """Return ``value`` if it is a finite duration greater than zero."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def non_negative(value: float, name: str) -> float:
    """Return ``value`` if it is a finite threshold of zero or more (zero means "all")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{name} must be zero or more seconds, got {value!r}")
    return float(value)


def finite(value: float, name: str) -> float:
    """Return ``value`` if it is a finite instant (a deadline on some clock)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {value!r}")
    return float(value)


MAX_PAGE = 10_000
"""The most ids one page of an operator's listing returns."""


def listing_page(after: str | None, limit: int) -> None:
    """Refuse a page of an operator's listing (`StateStore.tenants`,
    `Checkpointer.workflows`) before any I/O: ``after`` None or a usable id, ``limit`` from
    1 to `MAX_PAGE` (`InvalidInputError`)."""
    if after is not None:
        identifier(after, "after")
    positive_int(limit, "limit")
    if limit > MAX_PAGE:
        raise InvalidInputError(f"limit must be at most {MAX_PAGE}, got {limit}")
