"""How durably talks to PostgreSQL: anything with ``async fetch(statement, *args)``.

Statements use ``$1``-style placeholders, which both drivers accept: psycopg through its raw
cursor (server-side binding), asyncpg natively. A `Database` wraps a psycopg
``AsyncConnectionPool`` or an asyncpg ``Pool`` and hands out `Session`s; `bound` wraps the
caller's own connection so a store runs inside the caller's open transaction.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from durably.errors import ConfigurationError, PoolExhaustedError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

Row = Sequence[Any]

# psycopg's raw cursor and "rows returned" status, imported on first use so that importing
# durably (or running it over asyncpg) never imports psycopg.
_raw_cursor: Any = None
_tuples_ok: Any = None


def _load_psycopg() -> None:
    global _raw_cursor, _tuples_ok
    from psycopg import AsyncRawCursor
    from psycopg.pq import ExecStatus

    _raw_cursor, _tuples_ok = AsyncRawCursor, ExecStatus.TUPLES_OK


@functools.lru_cache(maxsize=1024)  # a store has about 60 statements; a few stores a process
def _sent(statement: str) -> bytes | str:
    """``statement`` as psycopg sends it, encoded once: psycopg encodes a text query on
    every call and keys its prepared statements by the bytes, hashing a new object each
    time; the same bytes object is hashed once. durably's statements are ASCII (table names
    are plain identifiers), which every client encoding spells alike; other text is left
    to psycopg."""
    return statement.encode("ascii") if statement.isascii() else statement


@runtime_checkable
class Executor(Protocol):
    """Runs one statement with positional ``$n`` parameters and returns its rows."""

    async def fetch(self, statement: str, *args: Any) -> Sequence[Row]:
        """Rows of ``statement`` (empty for a statement that returns none)."""
        ...


class Session(Protocol):
    """One connection: statements, transactions, and the handle effects are given."""

    async def fetch(self, statement: str, *args: Any) -> Sequence[Row]:
        """Rows of ``statement``."""
        ...

    async def count(self, statement: str, *args: Any) -> int:
        """How many rows ``statement`` (an ``INSERT``, ``UPDATE`` or ``DELETE`` without
        ``RETURNING``) wrote, from its command status: the hot writes only ask whether
        they wrote, and a result without rows is cheaper on both ends than one row."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """A transaction (or savepoint, inside one) around the block."""
        ...

    def effect_handle(self) -> AbstractAsyncContextManager[Any]:
        """What a `transact` effect receives: a psycopg cursor or an asyncpg connection."""
        ...


class PsycopgSession:
    """A psycopg ``AsyncConnection`` speaking ``$n`` parameters through a raw cursor."""

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self.connection = connection
        if _raw_cursor is None:
            _load_psycopg()

    async def fetch(self, statement: str, *args: Any) -> Sequence[Row]:
        # durably's statements are few and fixed per store: prepare each on its first use
        # rather than after psycopg's default five (a pool rotates connections, so most
        # calls would otherwise be planned afresh). A connection whose prepare_threshold
        # is None (e.g. behind PgBouncer) is left unprepared: psycopg honours that first.
        async with _raw_cursor(self.connection) as cursor:
            await cursor.execute(_sent(statement), args, prepare=True)
            result = cursor.pgresult
            # The result status, not `description`, which builds a Column per field.
            if result is None or result.status != _tuples_ok:
                return []
            rows: Sequence[Row] = await cursor.fetchall()
            return rows

    async def count(self, statement: str, *args: Any) -> int:
        # The command status ("INSERT 0 1"): psycopg sets up no row loaders for a result
        # without rows, and the server sends no row description (about 5% of an enqueue).
        async with _raw_cursor(self.connection) as cursor:
            await cursor.execute(_sent(statement), args, prepare=True)
            result = cursor.pgresult
            return 0 if result is None else result.command_tuples or 0

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return _psycopg_transaction(self.connection)

    @asynccontextmanager
    async def effect_handle(self) -> AsyncIterator[Any]:
        async with self.connection.cursor() as cursor:
            yield cursor


@asynccontextmanager
async def _psycopg_transaction(connection: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    async with connection.transaction():
        yield


class AsyncpgSession:
    """An asyncpg connection (already ``$n``-native)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def fetch(self, statement: str, *args: Any) -> Sequence[Row]:
        rows: Sequence[Row] = await self.connection.fetch(statement, *args)
        return rows

    async def count(self, statement: str, *args: Any) -> int:
        # asyncpg answers the command status ("INSERT 0 1"); its last word is the count.
        status: str = await self.connection.execute(statement, *args)
        return _counted(status)

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return _asyncpg_transaction(self.connection)

    @asynccontextmanager
    async def effect_handle(self) -> AsyncIterator[Any]:
        yield self.connection


def _counted(status: str) -> int:
    """The row count of a command status such as ``INSERT 0 1`` or ``UPDATE 3``."""
    last = status.rpartition(" ")[2]
    return int(last) if last.isdigit() else 0


@asynccontextmanager
async def _asyncpg_transaction(connection: Any) -> AsyncIterator[None]:
    async with connection.transaction():
        yield


class ExecutorSession:
    """Any bare `Executor` (a caller's shim): statements only, inside the caller's
    transaction; the executor itself is what an effect receives."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def fetch(self, statement: str, *args: Any) -> Sequence[Row]:
        return await self.executor.fetch(statement, *args)

    async def count(self, statement: str, *args: Any) -> int:
        # fetch answers rows only, so the written rows are asked for as rows.
        return len(await self.executor.fetch(f"{statement}\nRETURNING 1", *args))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        # The caller owns the transaction; nothing to open here.
        yield

    @asynccontextmanager
    async def effect_handle(self) -> AsyncIterator[Any]:
        yield self.executor


def session_for(connection: Any) -> Session:
    """Wrap the caller's connection (psycopg, asyncpg, or any `Executor`) as a `Session`."""
    if isinstance(connection, PsycopgSession | AsyncpgSession | ExecutorSession):
        return connection
    module = type(connection).__module__
    if module.startswith("psycopg"):
        return PsycopgSession(connection)
    if module.startswith("asyncpg"):
        return AsyncpgSession(connection)
    if isinstance(connection, Executor):
        return ExecutorSession(connection)
    raise ConfigurationError(
        f"cannot run statements on {type(connection).__name__}: pass a psycopg "
        "AsyncConnection, an asyncpg Connection or anything with async fetch(statement, *args)"
    )


class Database(Protocol):
    """A pool of sessions, identified by the pool it wraps."""

    @property
    def pool(self) -> object:
        """The driver pool this database hands connections from."""
        ...

    @property
    def pool_size(self) -> int | None:
        """The pool's maximum size, when known."""
        ...

    def session(self, timeout: float) -> AbstractAsyncContextManager[Session]:
        """A session in autocommit mode; `PoolExhaustedError` after ``timeout`` seconds."""
        ...

    async def listen_connection(self) -> Any:
        """A dedicated connection for LISTEN (outside the pool for psycopg)."""
        ...


class PsycopgDatabase:
    """A psycopg ``AsyncConnectionPool``."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    @property
    def pool(self) -> object:
        return self._pool

    @property
    def pool_size(self) -> int | None:
        return self._pool.max_size

    @asynccontextmanager
    async def session(self, timeout: float) -> AsyncIterator[Session]:
        from psycopg import pq
        from psycopg_pool import PoolTimeout

        try:
            connection = await self._pool.getconn(timeout=timeout)
        except PoolTimeout:
            if await self._server_away():
                # The pool kept failing to reconnect: an outage, retried as one.
                raise ConnectionError("the pool could not reach the server") from None
            raise PoolExhaustedError("postgres", self._pool.max_size) from None
        restore = connection.autocommit
        try:
            if connection.info.transaction_status != pq.TransactionStatus.IDLE:
                await connection.rollback()
            if not restore:
                await connection.set_autocommit(True)
            yield PsycopgSession(connection)
        finally:
            try:
                idle = connection.info.transaction_status == pq.TransactionStatus.IDLE
                if idle and not restore:
                    await connection.set_autocommit(False)
            finally:
                await self._pool.putconn(connection)

    async def _server_away(self) -> bool:
        """Whether the server refuses a fresh connection now (asked only after the pool's
        wait ran out: its connections may all be busy, or the server may be gone)."""
        import psycopg

        conninfo, kwargs = self._pool.conninfo, self._pool.kwargs
        if not isinstance(conninfo, str):  # computed per connection: not ours to repeat
            return False
        try:
            probe = await psycopg.AsyncConnection.connect(
                conninfo, **(kwargs if isinstance(kwargs, dict) else {})
            )
        except psycopg.OperationalError as refused:
            # A server that answered (FATAL: too many connections, say) is there, and the
            # pool is what ran out; psycopg quotes its words without the SQLSTATE.
            return refused.sqlstate is None and "FATAL:" not in str(refused)
        await probe.close()
        return False

    async def listen_connection(self) -> Any:
        import inspect

        import psycopg

        # psycopg-pool >= 3.3 accepts callables for conninfo and kwargs; resolve them.
        conninfo: Any = self._pool.conninfo
        kwargs: Any = self._pool.kwargs or {}
        if callable(conninfo):
            conninfo = conninfo()
        if inspect.isawaitable(conninfo):
            conninfo = await conninfo
        if callable(kwargs):
            kwargs = kwargs()
        if inspect.isawaitable(kwargs):
            kwargs = await kwargs
        return await psycopg.AsyncConnection.connect(str(conninfo), autocommit=True, **kwargs)


class AsyncpgDatabase:
    """An asyncpg ``Pool``."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @property
    def pool(self) -> object:
        return self._pool

    @property
    def pool_size(self) -> int | None:
        size = self._pool.get_max_size()
        return int(size) if size is not None else None

    @asynccontextmanager
    async def session(self, timeout: float) -> AsyncIterator[Session]:
        try:
            connection = await self._pool.acquire(timeout=timeout)
        except TimeoutError:
            raise PoolExhaustedError("postgres", self.pool_size) from None
        try:
            yield AsyncpgSession(connection)
        finally:
            await self._pool.release(connection)

    async def listen_connection(self) -> Any:
        # asyncpg pools do not expose their connect arguments; hold one pooled connection.
        return await self._pool.acquire()

    async def release_listen_connection(self, connection: Any) -> None:
        """Give the listening connection back to the pool."""
        await self._pool.release(connection)


def database_for(pool: object) -> Database:
    """Wrap a psycopg ``AsyncConnectionPool`` or an asyncpg ``Pool`` (or pass a `Database`)."""
    if isinstance(pool, PsycopgDatabase | AsyncpgDatabase):
        return pool
    module = type(pool).__module__
    if module.startswith("psycopg_pool"):
        return PsycopgDatabase(pool)  # type: ignore[arg-type]
    if module.startswith("asyncpg"):
        return AsyncpgDatabase(pool)
    raise ConfigurationError(
        f"expected a psycopg AsyncConnectionPool or an asyncpg Pool, got {type(pool).__name__}"
    )


__all__ = [
    "AsyncpgDatabase",
    "Database",
    "Executor",
    "PsycopgDatabase",
    "Row",
    "Session",
    "database_for",
    "session_for",
]
