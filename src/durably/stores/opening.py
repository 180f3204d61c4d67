"""`open_stores`: every store of one backing, opened from a DSN (`durably.dsn` reads it).

The backings are imported when a DSN names them, never before: importing durably imports
no datastore driver. A DSN may carry credentials, so nothing here ever shows one:
`Stores.location` is safe to print, every error's message is scrubbed, and the DSN is
held as a `SecretStr` until the driver is handed it (so a traceback's locals, which error
reporters capture, never show the password).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from durably.clock import Clock, SystemClock
from durably.errors import ConfigurationError, DurablyError, StoreUnavailableError
from durably.stores.changes import ChangeFeed
from durably.stores.dsn import (
    DEFAULT_POOL_SIZE,
    DEFAULT_POOL_TIMEOUT,
    Dsn,
    describe,
    parse,
    scrub,
    sqlite_file,
    sqlite_path,
)
from durably.stores.pacing import PacedDurable, WriteGate
from durably.stores.runs import StateStore
from durably.stores.work import QueuePolicy, WorkQueue
from durably.stores.workflows import Checkpointer, Durable, SplitDurable

Closer = Callable[[], Awaitable[None]]

_logger = logging.getLogger("durably.stores")

SQLITE_WRITE_SLOTS = 4
"""Record writes of passes in flight at once on SQLite, whose one connection runs them in
turn: enough to keep it busy, few enough that a handle's read or a claim's renewal never
queues behind a whole fan-out."""


async def _nothing() -> None:
    return None


@dataclass
class Stores:
    """Every store of one backing, opened from a DSN by `open_stores`.

    ``durable(kind)`` builds the `Durable` whose scheduler serves workflow kind ``kind``
    (the Worker uses the kind as the scheduler's namespace); the record writes of every
    pass through those durables share ``write_slots``. ``close()`` closes every connection
    opened for these stores and may be called more than once.
    """

    backing: str
    """``memory``, ``sqlite``, ``postgresql`` or ``redis``."""
    location: str
    """What the DSN names, safe to print (no user, no password)."""
    state: StateStore
    queue: WorkQueue
    checkpointer: Checkpointer[Any]
    make_durable: Callable[[str, float], Durable[Any]]
    closers: list[Closer] = field(default_factory=list)
    database: object | None = None
    """The backing's shared handle (the SQLite `Database`, the PostgreSQL pool, the Redis
    client), for code that builds more stores over it."""
    sqlite_path: str | None = None
    migrator: Closer = _nothing
    verifier: Closer = _nothing
    pool_size: int | None = None
    """The most connections the stores' pool holds at once (``?pool_size=``); None where
    there is no pool (memory; SQLite's one connection). On PostgreSQL over psycopg the
    stores' one listening connection (shared by every store that waits) is outside it."""
    write_slots: int | None = None
    """The record writes of passes (through every `durable`) in flight at once: half the
    pool, so a gather of thousands of steps queues in the process and leaves connections
    for claims, reports and handles; None: not paced (memory)."""
    bound_to_loop: bool = True
    """Whether the stores hold connections or waits of the event loop that opened them,
    and so serve no other loop (every backing but memory, whose stores are plain objects of
    this process: an App keeps them across loops, where it opens the others afresh)."""
    _gate: WriteGate | None = field(default=None, init=False, repr=False)

    def durable(self, kind: str = "default", *, lease: float = 30.0) -> Durable[Any]:
        """The `Durable` serving workflows of ``kind``; deliveries are leased ``lease`` s.
        A pass's record writes go through the stores' ``write_slots``, and one that finds
        the pool exhausted is tried again for up to ``lease`` s instead of failing the
        pass. `close` closes its scheduler (on PostgreSQL, its share of the listening
        connection) before the connections it runs on."""
        made = self.make_durable(kind, lease)
        self.closers.append(made.scheduler.close)
        if self.write_slots is None:
            return made
        if self._gate is None:
            self._gate = WriteGate(self.write_slots)
        return PacedDurable(made, self._gate, lease)

    @property
    def changes(self) -> ChangeFeed | None:
        """The feed of the checkpointer's announcements (`durably.stores.changes`): what
        wakes a waiting handle; None for a checkpointer that announces nothing."""
        feed = getattr(self.checkpointer, "changes", None)
        return feed if isinstance(feed, ChangeFeed) else None

    async def migrate(self) -> None:
        """Create or update the schema (PostgreSQL: `durably.postgres.migrate` under its
        advisory lock; SQLite applies its schema when opened; Redis and memory keep none),
        then `verify`."""
        await self.migrator()
        await self.verify()

    async def verify(self) -> None:
        """Refuse a store this release cannot use (`ConfigurationError`); changes nothing."""
        await self.verifier()

    async def prepare(self) -> None:
        """`verify`, and `migrate` only if it refuses: what a process opening a store
        beside serving ones does. A schema already at this release's version is left
        alone, so no table lock of the migration (PostgreSQL's idempotent ``ALTER TABLE``
        still takes one) stalls the writes of the processes serving meanwhile. A layout
        an earlier build left at the same version is not repaired here: `migrate`
        (``durably migrate``) does that."""
        try:
            await self.verify()
        except ConfigurationError:
            await self.migrate()

    async def close(self) -> None:
        """Close every connection this opened and every `durable`'s scheduler, the
        schedulers first (idempotent)."""
        closers, self.closers = self.closers, []
        feed = self.changes
        if feed is not None:
            await feed.stop()  # its listening connection before the pool it came from
        for close in reversed(closers):
            await close()


async def open_stores(
    dsn: str | SecretStr,
    *,
    clock: Clock | None = None,
    policy: QueuePolicy | None = None,
    create: bool = True,
) -> Stores:
    """Open every store of the backing ``dsn`` names.

    ``dsn`` is ``memory://``, ``sqlite:///relative.db`` / ``sqlite:////absolute.db``,
    ``postgresql://user@host/db`` (``postgresql+asyncpg://`` opens an asyncpg pool instead of
    psycopg's; ``postgresql+psycopg://`` and ``postgres://`` are read as ``postgresql://``)
    or ``redis://host:6379/0`` (``rediss://`` for TLS), also as a `SecretStr`. On
    PostgreSQL and Redis, ``?pool_size=N`` caps the connections the stores hold (default
    10 on PostgreSQL, 50 on Redis) and ``?pool_timeout=S`` is how long a call waits for a
    free one (default 5 s) before `PoolExhaustedError`; the pool waits rather than
    refuses. ``clock`` is the stores' clock (default `SystemClock`); ``policy`` the
    queue's retry policy. With ``create=False`` a SQLite file that does not exist is
    refused instead of created.

    Nothing applies PostgreSQL schema here: call `Stores.migrate` (or `durably migrate`).
    `Stores.verify` (which `migrate` and `durably.App` run) refuses a PostgreSQL or Redis
    server that may lose what it acknowledged (``synchronous_commit`` or ``fsync`` off;
    Redis persistence off or an evicting ``maxmemory-policy``) unless the DSN says
    ``?durable=false``. Close the stores with ``await stores.close()``.

    Raises `DsnError` (a `ConfigurationError`) before any I/O for a malformed DSN;
    `ConfigurationError` when the backing is not installed, the SQLite file or the
    PostgreSQL database does not exist, or the server refused the login;
    `StoreUnavailableError` when the server cannot be reached. No message contains the DSN
    or its password.

    >>> stores = await open_stores("sqlite:///app.db")  # doctest: +SKIP
    """
    # Held secret from here on: a frame's locals are what error reporters capture.
    dsn = dsn if isinstance(dsn, SecretStr) else SecretStr(dsn)
    parsed = parse(dsn)
    clock = clock or SystemClock()
    policy = policy or QueuePolicy()
    try:
        if parsed.backing == "memory":
            return _open_memory(clock, policy)
        if parsed.backing == "sqlite":
            path = sqlite_path(parsed.url.get_secret_value())
            if not create:
                _existing(path)
            fresh = _missing(path)
            stores = await _open_sqlite(path, clock, policy)
            if fresh:
                # Said out loud: a process started in another directory, or with a typo,
                # opens a database of its own and finds none of the others' work.
                _logger.warning(
                    "created a new, empty SQLite database %s (there was no file): a "
                    "process meant to share a database must open this same file",
                    sqlite_file(path),
                )
            return stores
        if parsed.backing == "postgresql":
            return await _open_postgres(parsed, clock, policy)
        return await _open_redis(parsed, clock, policy)
    except DurablyError as exc:
        failure: DurablyError = exc
        exc.args = (scrub(str(exc), dsn),)
    except (OSError, ImportError) as exc:
        failure = ConfigurationError(f"cannot open {describe(dsn)}: {scrub(str(exc), dsn)}")
    except Exception as exc:  # a driver's own connection error
        failure = StoreUnavailableError(
            f"cannot reach {describe(dsn)}: {type(exc).__name__}: {scrub(str(exc), dsn)}"
        )
    # Raised here, outside the handlers, with no chain: the driver's exception and its
    # frames (whose locals hold the DSN the driver was given) go no further.
    failure.__cause__ = failure.__context__ = None
    raise failure


def _missing(path: str) -> bool:
    """Whether SQLite file ``path`` does not exist yet (opening it creates it)."""
    return path != ":memory:" and not os.path.exists(path)


def _existing(path: str) -> None:
    """Refuse a SQLite file that does not exist (rather than create an empty one)."""
    if not os.path.exists(path):
        raise ConfigurationError(
            f"no such database: {sqlite_file(path)} (the SQLite file is missing)"
        )


def _backing(module: str, label: str) -> Any:
    """Import a backing lazily; `ConfigurationError` if it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"the {label} backing is not available ({exc}): install durably[{label.lower()}]"
        ) from None


def _open_memory(clock: Clock, policy: QueuePolicy) -> Stores:
    memory = _backing("durably.memory", "memory")
    checkpointer = memory.MemoryCheckpointer()
    state = memory.MemoryStateStore(clock=clock)
    checkpointer.follow_runs(state)
    schedulers: dict[str, Any] = {}

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        # One scheduler per kind, shared by every caller of this process.
        if kind not in schedulers:
            schedulers[kind] = memory.MemoryScheduler(lease=lease, namespace=kind)
        durable_type = getattr(memory, "MemoryDurable", None)
        if durable_type is not None:
            return durable_type(checkpointer, schedulers[kind])  # type: ignore[no-any-return]
        return SplitDurable(checkpointer, schedulers[kind])

    return Stores(
        backing="memory",
        location="memory (this process only)",
        state=state,
        queue=memory.MemoryWorkQueue(clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
        bound_to_loop=False,
    )


async def _open_sqlite(path: str, clock: Clock, policy: QueuePolicy) -> Stores:
    sqlite = _backing("durably.sqlite", "SQLite")
    database = await sqlite.connect(path)
    checkpointer = sqlite.SqliteCheckpointer(database)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = sqlite.SqliteScheduler(database, lease=lease, namespace=kind)
        return sqlite.SqliteDurable(checkpointer, scheduler)  # type: ignore[no-any-return]

    return Stores(
        backing="sqlite",
        location=f"sqlite {sqlite_file(path)}",
        state=sqlite.SqliteStateStore(database, clock=clock),
        queue=sqlite.SqliteWorkQueue(database, clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[database.close],
        database=database,
        sqlite_path=path,
        write_slots=SQLITE_WRITE_SLOTS,
    )


async def _open_postgres(parsed: Dsn, clock: Clock, policy: QueuePolicy) -> Stores:
    postgres = _backing("durably.postgres", "PostgreSQL")
    settings = postgres.PostgresStoreSettings(
        dsn=parsed.url,
        pool_size=parsed.pool_size or DEFAULT_POOL_SIZE["postgresql"],
        pool_timeout_seconds=parsed.pool_timeout or DEFAULT_POOL_TIMEOUT,
        durable=parsed.durable,
        pooler=parsed.pooler,
        listen_dsn=parsed.listen,
    )
    pool = await postgres.open_pool(settings, driver=parsed.driver)
    checkpointer = postgres.PostgresCheckpointer(pool, settings=settings)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = postgres.PostgresScheduler(pool, lease=lease, namespace=kind, settings=settings)
        return postgres.PostgresDurable(checkpointer, scheduler)  # type: ignore[no-any-return]

    async def migrate() -> None:
        await postgres.migrate(pool)

    async def verify() -> None:
        await postgres.verify(pool, durable=parsed.durable)

    queue = postgres.PostgresWorkQueue(pool, clock=clock, policy=policy, settings=settings)
    return Stores(
        backing="postgresql",
        location=describe(parsed.url),
        state=postgres.PostgresStateStore(pool, clock=clock, settings=settings),
        queue=queue,
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[pool.close, queue.close],  # the queue's listener leaves before the pool goes
        database=pool,
        migrator=migrate,
        verifier=verify,
        pool_size=settings.pool_size,
        write_slots=_half(settings.pool_size),
    )


async def _open_redis(parsed: Dsn, clock: Clock, policy: QueuePolicy) -> Stores:
    redis_backing = _backing("durably.redis", "Redis")
    client_module = _backing("redis.asyncio", "Redis")
    settings = redis_backing.RedisStoreSettings(
        dsn=parsed.url,
        pool_size=parsed.pool_size or DEFAULT_POOL_SIZE["redis"],
        pool_timeout_seconds=parsed.pool_timeout or DEFAULT_POOL_TIMEOUT,
        durable=parsed.durable,
        cluster=bool(parsed.cluster),
        cluster_nodes=parsed.cluster[1:],
    )
    client = settings.client()  # no I/O yet; an option the client does not take is refused
    try:
        await client.ping()
    except client_module.AuthenticationError as exc:
        await client.aclose()
        raise ConfigurationError(f"the server refused the login: {exc}") from None
    except Exception:
        await client.aclose()
        raise
    checkpointer = redis_backing.RedisCheckpointer(client, settings=settings)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = redis_backing.RedisScheduler(
            client, lease=lease, namespace=kind, settings=settings
        )
        durable_type = getattr(redis_backing, "RedisDurable", SplitDurable)
        return durable_type(checkpointer, scheduler)

    return Stores(
        backing="redis",
        location=describe(parsed.url),
        state=redis_backing.RedisStateStore(client, clock=clock, settings=settings),
        queue=redis_backing.RedisWorkQueue(client, clock=clock, policy=policy, settings=settings),
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[client.aclose],
        database=client,
        verifier=functools.partial(redis_backing.preflight, client, durable=parsed.durable),
        pool_size=settings.pool_size,
        write_slots=_half(settings.pool_size),
    )


def _half(pool_size: int) -> int:
    """The writes of passes a pool of ``pool_size`` takes at once (`Stores.write_slots`)."""
    return max(1, pool_size // 2)


__all__ = ["SQLITE_WRITE_SLOTS", "Stores", "open_stores"]
