"""`MemoryClaimCheckStore`: claim-check blobs in a dict, for tests and single processes."""

from __future__ import annotations

from durably.claimcheck.store import claim_digest, deposit, redeemed
from durably.clock import Clock, SystemClock


class MemoryClaimCheckStore:
    """A `ClaimCheckStore` held in this process; expiry read from ``clock``."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._blobs: dict[str, tuple[bytes, float]] = {}

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` under its handle for ``ttl`` seconds (None: until forgotten)."""
        checked = deposit(data, ttl, self._clock.now())
        held = self._blobs.get(checked.digest)
        expires_at = checked.expires_at if held is None else max(held[1], checked.expires_at)
        self._blobs[checked.digest] = (checked.data, expires_at)
        return checked.handle

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``; `ClaimUnavailableError` if missing or expired."""
        return redeemed(handle, self._blobs.get(claim_digest(handle)), self._clock.now())

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle``; whether there was one."""
        return self._blobs.pop(claim_digest(handle), None) is not None

    async def purge(self) -> int:
        """Drop every expired blob; how many."""
        now = self._clock.now()
        expired = [digest for digest, (_, at) in self._blobs.items() if at <= now]
        for digest in expired:
            del self._blobs[digest]
        return len(expired)

    async def close(self) -> None:
        """Nothing to release (idempotent)."""

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included."""
        return len(self._blobs)


__all__ = ["MemoryClaimCheckStore"]
