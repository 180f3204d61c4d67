"""`RedisClaimCheckStore`: claim-check blobs as Redis hashes (data and expiry time).

Expiry is read from the store's ``clock``, as every backing reads it; the server also
expires each key a minute after that time (by its own clock), so memory is given back
without a purge.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Self

from durably.claimcheck.store import claim_digest, deposit, redeemed
from durably.clock import Clock, SystemClock
from durably.redis import keys
from durably.redis.connection import RedisConnection, number, text
from durably.redis.preflight import preflight
from durably.redis.scripts import scripts
from durably.redis.settings import RedisStoreSettings

_LUA = scripts("claimcheck_put")
_GRACE_MS = 60_000  # the server keeps a key this long past its expiry on the store's clock


class RedisClaimCheckStore:
    """A `ClaimCheckStore` over Redis; keys start with ``key_prefix``. ``open`` runs
    `preflight`; the constructor does not. The client stays open for its owner to close."""

    def __init__(
        self,
        client: Any,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        key_prefix: str | None = None,
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._redis = RedisConnection(client, settings, key_prefix, self._clock)

    @classmethod
    async def open(
        cls,
        client: Any,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings,
        key_prefix: str | None = None,
    ) -> Self:
        """A store over ``client`` once `preflight` accepted the server."""
        await preflight(client, durable=settings.durable)
        return cls(client, clock=clock, settings=settings, key_prefix=key_prefix)

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` under its handle for ``ttl`` seconds (None: until forgotten)."""
        checked = deposit(data, ttl, self._clock.now())
        lifetime = "" if ttl is None else str(math.ceil(ttl * 1000) + _GRACE_MS)
        key = keys.claim_key(self._redis.key_prefix, checked.digest)
        script, client = _LUA["claimcheck_put"], self._redis.client
        args = [checked.data, number(checked.expires_at), lifetime]
        await self._redis.state(lambda: script(client, [key], args))
        return checked.handle

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``; `ClaimUnavailableError` if missing or expired."""
        key = keys.claim_key(self._redis.key_prefix, claim_digest(handle))
        client = self._redis.client
        data, expires_at = await self._redis.state(lambda: client.hmget(key, "data", "expires_at"))
        found = None
        if data is not None and expires_at is not None:
            raw = data if isinstance(data, bytes) else data.encode()
            found = (raw, float(text(expires_at)))
        return redeemed(handle, found, self._clock.now())

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle``; whether there was one."""
        key = keys.claim_key(self._redis.key_prefix, claim_digest(handle))
        client = self._redis.client
        return bool(await self._redis.state(lambda: client.delete(key)))

    async def purge(self) -> int:
        """Drop every blob expired on the store's clock; how many (a SCAN of the key prefix)."""
        now, dropped, client = self._clock.now(), 0, self._redis.client
        for key in await self._keys():
            expires_at = await self._redis.state(partial(client.hget, key, "expires_at"))
            if expires_at is not None and float(text(expires_at)) <= now:
                dropped += int(await self._redis.state(partial(client.delete, key)))
        return dropped

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included (a SCAN)."""
        return len(await self._keys())

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the client is its owner's."""

    async def _keys(self) -> list[Any]:
        client, pattern = self._redis.client, keys.claim_pattern(self._redis.key_prefix)

        async def scan() -> list[Any]:
            return [key async for key in client.scan_iter(match=pattern, count=500)]

        return await self._redis.state(scan)


__all__ = ["RedisClaimCheckStore"]
