"""`PostgresClaimCheckStore`: claim-check blobs in a ``bytea`` table."""

from __future__ import annotations

from typing import Any, Self

from durably.claimcheck.store import claim_digest, deposit, redeemed
from durably.clock import Clock, SystemClock
from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.failures import RetryBudget, state_errors
from durably.postgres.migrate import verify
from durably.postgres.schema import StateTables
from durably.postgres.settings import PostgresStoreSettings

_TEMPLATES = statements.load("claimcheck.sql")


class PostgresClaimCheckStore:
    """A `ClaimCheckStore` in PostgreSQL (table `StateTables.claim_check`, created by
    `migrate`); expiry read from ``clock``. The pool stays open for its owner to close."""

    def __init__(
        self,
        pool: Any,
        *,
        clock: Clock | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._access = Access.over(pool, settings.retry if settings else RetryBudget())
        self._sql = statements.render_all(_TEMPLATES, (tables or StateTables()).names)

    @classmethod
    async def open(
        cls,
        pool: Any,
        *,
        clock: Clock | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> Self:
        """A store after `verify` accepted the database (`ConfigurationError` otherwise)."""
        await verify(pool, tables, durable=settings.durable if settings else True)
        return cls(pool, clock=clock, settings=settings, tables=tables)

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` under its handle for ``ttl`` seconds (None: until forgotten)."""
        checked = deposit(data, ttl, self._clock.now())
        await self._access.run(
            lambda s: s.count(self._sql["put"], checked.digest, checked.data, checked.expires_at),
            errors=state_errors,
        )
        return checked.handle

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``; `ClaimUnavailableError` if missing or expired."""
        digest = claim_digest(handle)
        rows = await self._access.run(
            lambda s: s.fetch(self._sql["fetch"], digest), errors=state_errors
        )
        found = (bytes(rows[0][0]), float(rows[0][1])) if rows else None
        return redeemed(handle, found, self._clock.now())

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle``; whether there was one."""
        digest = claim_digest(handle)
        deleted = await self._access.run(
            lambda s: s.count(self._sql["forget"], digest), errors=state_errors
        )
        return deleted > 0

    async def purge(self) -> int:
        """Drop every expired blob; how many."""
        now = self._clock.now()
        return await self._access.run(
            lambda s: s.count(self._sql["purge"], now), errors=state_errors
        )

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included."""
        rows = await self._access.run(lambda s: s.fetch(self._sql["held"]), errors=state_errors)
        return int(rows[0][0])

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the pool is its owner's."""


__all__ = ["PostgresClaimCheckStore"]
