"""How durably talks to PostgreSQL: anything with ``async fetch(statement, *args)``.

Statements use ``$1``-style placeholders, which both drivers accept: psycopg through its raw
cursor (server-side binding), asyncpg natively. A `Database` wraps a psycopg
``AsyncConnectionPool`` or an asyncpg ``Pool`` and hands out `Session`s; `bound` wraps the
caller's own connection so a store runs inside the caller's open transaction.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from durably.errors import ConfigurationError, PoolExhaustedError
from durably.postgres.pooler import pooled

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

    @property
    def listens(self) -> bool:
        """Whether a listening connection can be had: not through a transaction pooler
        with no direct DSN to listen on (waiters then poll)."""
        ...

    async def listen_connection(self) -> Any:
        """A dedicated connection for LISTEN (outside the pool for psycopg; over the
        direct DSN behind a transaction pooler)."""
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
            # One per pool, shared by every store over it (each wraps the pool anew).
            outages = _OUTAGES.get(self._pool)
            if outages is None:
                outages = _OUTAGES[self._pool] = Outages()
            if await outages.server_away(self._pool):
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

    @property
    def listens(self) -> bool:
        return _listens(self._pool)

    async def listen_connection(self) -> Any:
        import psycopg

        behind = _listen_target(self._pool)
        if behind is not None:
            return await psycopg.AsyncConnection.connect(
                behind.listen.get_secret_value() if behind.listen else "",
                autocommit=True,
                **behind.listen_kwargs,
            )
        # psycopg-pool >= 3.3 accepts callables for conninfo and kwargs; resolved in the
        # call, so no local of this frame holds the password.
        return await psycopg.AsyncConnection.connect(
            str(await _resolved(self._pool.conninfo)),
            autocommit=True,
            **(await _resolved(self._pool.kwargs or {})),
        )


def _listens(pool: Any) -> bool:
    behind = pooled(pool)
    return behind is None or behind.listen is not None


def _listen_target(pool: Any) -> Any:
    """How ``pool`` listens behind a transaction pooler (None: as its own connections)."""
    behind = pooled(pool)
    if behind is not None and behind.listen is None:
        raise ConfigurationError("no listening through a transaction pooler without ?listen=")
    return behind


async def _resolved(value: Any) -> Any:
    """``value``, or what calling it gives (awaited when that is awaitable)."""
    if callable(value):
        value = value()
    if inspect.isawaitable(value):
        value = await value
    return value


class Outages:
    """Whether a psycopg pool whose wait for a connection ran out cannot reach the server,
    or has every connection busy (psycopg-pool raises the same `PoolTimeout` for both).

    Read from the pool's own counters: while every connection it tried to make was made,
    its connections are busy and nothing more is asked. Only when its attempts failed
    since the last look is one connection tried beside it, by one caller at a time (the
    others wait for that answer): refused, or unanswered, the server is away, and stays
    so until the pool makes a connection again; accepted, or refused by a server out of
    connections, the pool is exhausted. So a stalled pool never makes its waiters open
    connections of their own.
    """

    def __init__(self) -> None:
        # Counted from nothing: failures from before the first look are looked into once.
        self._failed = self._made = 0
        self._away = False
        self._asking: asyncio.Future[bool] | None = None

    async def server_away(self, pool: AsyncConnectionPool[Any]) -> bool:
        """Whether ``pool``'s wait ran out because the server is away."""
        if self._asking is not None:
            return await asyncio.shield(self._asking)
        failed, made = _attempts(pool)
        if self._away and made == self._made:
            return True  # no connection made since the server was found away
        self._made = made
        if failed == self._failed:
            self._away = False
            return False
        self._failed = failed
        self._asking = asyncio.ensure_future(_refused(pool))
        try:
            self._away = await asyncio.shield(self._asking)
        finally:
            self._asking = None
        return self._away


_OUTAGES: weakref.WeakKeyDictionary[Any, Outages] = weakref.WeakKeyDictionary()


def _attempts(pool: AsyncConnectionPool[Any]) -> tuple[int, int]:
    """How many connections ``pool`` failed to make, and made, so far."""
    stats = pool.get_stats()
    failed = stats.get("connections_errors", 0)
    return failed, stats.get("connections_num", 0) - failed


async def _refused(pool: AsyncConnectionPool[Any]) -> bool:
    """Whether the server refuses (or does not answer) a connection made as ``pool``'s
    are; one that answered (FATAL: too many connections, say) is there."""
    import psycopg

    if not isinstance(pool.conninfo, str):  # computed per connection: not ours to repeat
        return False
    try:
        probe = await psycopg.AsyncConnection.connect(
            pool.conninfo, **(pool.kwargs if isinstance(pool.kwargs, dict) else {})
        )
    except psycopg.OperationalError as refused:
        # psycopg quotes the server's words without the SQLSTATE.
        return refused.sqlstate is None and "FATAL:" not in str(refused)
    except Exception:
        return True  # no answer the driver could read
    await probe.close()
    return False


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

    @property
    def listens(self) -> bool:
        return _listens(self._pool)

    async def listen_connection(self) -> Any:
        behind = _listen_target(self._pool)
        if behind is not None:
            import asyncpg

            options = behind.listen_kwargs.get("options", "")
            setting = options.removeprefix("-c statement_timeout=")
            return await asyncpg.connect(
                behind.listen.get_secret_value(),
                timeout=behind.listen_kwargs.get("connect_timeout", 10),
                server_settings={"statement_timeout": setting} if setting else None,
            )
        # asyncpg pools do not expose their connect arguments; hold one pooled connection.
        return await self._pool.acquire()

    async def release_listen_connection(self, connection: Any) -> None:
        """Give the listening connection back to the pool (close a direct one)."""
        if pooled(self._pool) is not None:
            await connection.close()
            return
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
    "Outages",
    "PsycopgDatabase",
    "Row",
    "Session",
    "database_for",
    "session_for",
]
