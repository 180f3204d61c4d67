"""`SqliteClaimCheckStore`: claim-check blobs in a table of the SQLite file."""

from __future__ import annotations

from durably.claimcheck.store import claim_digest, deposit, redeemed
from durably.clock import Clock, SystemClock
from durably.sqlite.connection import Database
from durably.sqlite.statements import load_statements

_SQL = load_statements("claimcheck.sql")


class SqliteClaimCheckStore:
    """A `ClaimCheckStore` over a SQLite `Database` (table ``durably_claim_check``);
    expiry read from ``clock``. The database stays open for its owner to close."""

    def __init__(self, database: Database, *, clock: Clock | None = None) -> None:
        self._db = database
        self._clock: Clock = clock if clock is not None else SystemClock()

    @property
    def database(self) -> Database:
        """The database this store lives in."""
        return self._db

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` under its handle for ``ttl`` seconds (None: until forgotten)."""
        checked = deposit(data, ttl, self._clock.now())
        params = {"digest": checked.digest, "data": checked.data, "expires_at": checked.expires_at}
        await self._db.transaction(lambda tx: tx.execute(_SQL["put"], params))
        return checked.handle

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``; `ClaimUnavailableError` if missing or expired."""
        params = {"digest": claim_digest(handle)}
        row = await self._db.transaction(lambda tx: tx.one(_SQL["fetch"], params), write=False)
        found = None if row is None else (bytes(row[0]), float(row[1]))
        return redeemed(handle, found, self._clock.now())

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle``; whether there was one."""
        params = {"digest": claim_digest(handle)}
        forgot = await self._db.transaction(lambda tx: tx.execute(_SQL["forget"], params).rowcount)
        return forgot > 0

    async def purge(self) -> int:
        """Drop every expired blob; how many."""
        params = {"now": self._clock.now()}
        purged = await self._db.transaction(lambda tx: tx.execute(_SQL["purge"], params).rowcount)
        return int(purged)

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included."""
        row = await self._db.transaction(lambda tx: tx.row(_SQL["count"]), write=False)
        return int(row[0])

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the database is its owner's."""


__all__ = ["SqliteClaimCheckStore"]
