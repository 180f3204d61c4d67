"""The claim check: a large value kept aside under a content-addressed handle.

A `ClaimCheckStore` holds blobs under ``claim:<sha256 hex>`` handles, each until a time
to live measured on the store's clock (or until forgotten). Equal data gives the same
handle and is stored once; putting it again only ever lengthens its life. What every
backing shares (the handle's shape, the checks on input, when a blob counts as expired)
is written here; a backing only keeps the bytes and the expiry time.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from durably.errors import ClaimUnavailableError, InvalidInputError
from durably.validation import positive

HANDLE_PREFIX = "claim:"
_HANDLE = re.compile(r"claim:([0-9a-f]{64})\Z")

NEVER = math.inf
"""The expiry time of a blob put without a time to live."""


@runtime_checkable
class ClaimCheckStore(Protocol):
    """Blobs under content-addressed ``claim:<hash>`` handles, each with a time to live."""

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` (text is kept as UTF-8) and return its handle. ``ttl`` seconds
        of the store's clock, or None to keep it until forgotten; putting equal data again
        keeps one blob and never shortens its life. `InvalidInputError` before any I/O for
        data that is neither bytes nor text, or a ``ttl`` that is not a positive number."""
        ...

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``. `ClaimUnavailableError` when it is missing
        (never put here, or forgotten) or expired; `InvalidInputError` before any I/O for
        a handle that is not ``claim:`` and 64 lower-case hex digits."""
        ...

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle`` (shared by every put of equal data); whether
        there was one."""
        ...

    async def purge(self) -> int:
        """Drop every expired blob; how many were dropped."""
        ...

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included."""
        ...

    async def close(self) -> None:
        """Release what the store holds of its own (idempotent); a shared pool, client or
        database stays open for its owner to close."""
        ...


@dataclass(frozen=True, slots=True)
class Deposit:
    """Data checked for `ClaimCheckStore.put`: its digest, bytes and expiry time."""

    digest: str
    data: bytes
    expires_at: float

    @property
    def handle(self) -> str:
        """The handle the data is kept under."""
        return HANDLE_PREFIX + self.digest


def deposit(data: object, ttl: float | None, now: float) -> Deposit:
    """``data`` ready to keep from ``now`` for ``ttl`` seconds (None: until forgotten).
    Raises `InvalidInputError` for data that is neither bytes nor valid text, or a bad
    ``ttl``."""
    if isinstance(data, str):
        try:
            raw = data.encode()
        except UnicodeEncodeError:
            raise InvalidInputError("claim check data must be valid Unicode text") from None
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
    else:
        kind = type(data).__name__
        raise InvalidInputError(f"claim check data must be bytes or text, got {kind}")
    expires_at = NEVER if ttl is None else now + positive(ttl, "ttl")
    return Deposit(hashlib.sha256(raw).hexdigest(), raw, expires_at)


def claim_digest(handle: object) -> str:
    """The digest inside ``handle``; `InvalidInputError` for anything but a handle."""
    match = _HANDLE.match(handle) if isinstance(handle, str) else None
    if match is None:
        shown = repr(handle)[:80] if isinstance(handle, str) else type(handle).__name__
        raise InvalidInputError(
            f"a claim check handle is 'claim:' and 64 lower-case hex digits, got {shown}"
        )
    return match[1]


def is_handle(value: object) -> bool:
    """Whether ``value`` has the shape of a claim check handle."""
    return isinstance(value, str) and _HANDLE.match(value) is not None


def redeemed(handle: str, found: tuple[bytes, float] | None, now: float) -> bytes:
    """The data of a blob read as ``found`` (its bytes and expiry time) at ``now``;
    `ClaimUnavailableError` when there was none or it has expired."""
    if found is None:
        raise ClaimUnavailableError(handle, "missing")
    data, expires_at = found
    if expires_at <= now:
        raise ClaimUnavailableError(handle, "expired")
    return data


__all__ = [
    "HANDLE_PREFIX",
    "NEVER",
    "ClaimCheckStore",
    "Deposit",
    "claim_digest",
    "deposit",
    "is_handle",
    "redeemed",
]
