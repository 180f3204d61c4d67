"""Checks on arguments, applied before any I/O on every backing."""

from __future__ import annotations

import math

from durably.errors import InvalidInputError


def identifier(value: object, name: str) -> str:
    """Return ``value`` if it is a usable id: a non-empty string without NUL characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInputError(f"{name} must not be empty")
    if "\x00" in value:
        raise InvalidInputError(f"{name} must not contain a NUL character")
    return value


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
