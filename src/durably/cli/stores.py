"""Open a backing from a DSN: ``memory://``, ``sqlite:///path``, ``postgresql://...``,
``redis://...``.

A DSN may carry credentials, so nothing here ever prints one: `Stores.location` is a
description safe to show (scheme, host, port, database or path only).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

from durably.clock import Clock, SystemClock
from durably.errors import DurablyError
from durably.runs import StateStore
from durably.work import QueuePolicy, WorkQueue
from durably.workflows import Checkpointer, Durable, SplitDurable

SCHEMES = ("memory", "sqlite", "postgresql", "redis")
DSN_ENV = "DURABLY_DSN"


class UsageError(ValueError):
    """A command refused its arguments after parsing (exit code 2)."""


class DsnError(UsageError):
    """The DSN is malformed or names no backing (a usage error: exit code 2)."""


class StoreUnavailable(Exception):
    """The store named by the DSN cannot be opened or reached (exit code 1)."""


@dataclass
class Stores:
    """Every store of one backing, opened from a DSN.

    ``durable(kind)`` builds the `Durable` whose scheduler serves workflow kind ``kind``
    (the Worker uses the kind as the scheduler's namespace).
    """

    backing: str
    location: str
    state: StateStore
    queue: WorkQueue
    checkpointer: Checkpointer[Any]
    make_durable: Callable[[str, float], Durable[Any]]
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    database: object | None = None
    """The backing's shared handle (the SQLite `Database`), for code that needs more."""
    sqlite_path: str | None = None

    def durable(self, kind: str = "default", *, lease: float = 30.0) -> Durable[Any]:
        """The `Durable` serving workflows of ``kind``; deliveries are leased ``lease`` s."""
        return self.make_durable(kind, lease)

    async def close(self) -> None:
        """Close every connection this opened (idempotent)."""
        closers, self.closers = self.closers, []
        for close in reversed(closers):
            await close()


def scheme_of(dsn: str) -> str:
    """The backing a DSN names; `DsnError` when it names none."""
    if not dsn or "://" not in dsn:
        raise DsnError(
            "a DSN looks like sqlite:///path/to/file.db, postgresql://host/db, "
            "redis://host:6379/0 or memory://"
        )
    scheme = dsn.split("://", 1)[0].lower()
    scheme = {"postgres": "postgresql", "rediss": "redis", "sqlite3": "sqlite"}.get(scheme, scheme)
    if scheme.startswith("postgresql+"):
        scheme = "postgresql"
    if scheme not in SCHEMES:
        raise DsnError(f"unknown DSN scheme {scheme!r}: use one of {', '.join(SCHEMES)}")
    return scheme


def sqlite_path(dsn: str) -> str:
    """The file a ``sqlite:///path`` DSN names (``sqlite:////abs`` or ``sqlite:///rel``)."""
    rest = dsn.split("://", 1)[1]
    if not rest.startswith("/"):
        raise DsnError("a SQLite DSN is sqlite:///relative/path.db or sqlite:////absolute/path.db")
    path = unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise DsnError("the SQLite DSN names no file: use sqlite:///path/to/file.db")
    return path


def describe(dsn: str) -> str:
    """A description of the DSN's target that is safe to print (no user, no password)."""
    scheme = scheme_of(dsn)
    if scheme == "memory":
        return "memory (this process only)"
    if scheme == "sqlite":
        return f"sqlite {sqlite_path(dsn)}"
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return scheme
    return f"{scheme} {host}{port}{parts.path or ''}"


def scrub(message: str, dsn: str) -> str:
    """``message`` with the DSN and any password in it removed."""
    text = message.replace(dsn, "<dsn>")
    try:
        password = urlsplit(dsn).password
    except ValueError:
        password = None
    if password:
        text = text.replace(password, "***").replace(unquote(password), "***")
    return text


async def open_stores(
    dsn: str,
    *,
    clock: Clock | None = None,
    policy: QueuePolicy | None = None,
) -> Stores:
    """Open the stores of the backing ``dsn`` names.

    Raises `DsnError` for a malformed DSN and `StoreUnavailable` (its message never
    containing the DSN) when the backing is not installed or the store cannot be reached.
    """
    scheme = scheme_of(dsn)
    clock = clock or SystemClock()
    policy = policy or QueuePolicy()
    try:
        if scheme == "memory":
            return _open_memory(clock, policy)
        if scheme == "sqlite":
            return await _open_sqlite(sqlite_path(dsn), clock, policy)
        if scheme == "postgresql":
            return await _open_postgres(dsn, clock, policy)
        return await _open_redis(dsn, clock, policy)
    except (DsnError, StoreUnavailable):
        raise
    except (DurablyError, OSError, ImportError) as exc:
        raise StoreUnavailable(f"cannot open {describe(dsn)}: {scrub(str(exc), dsn)}") from None
    except Exception as exc:  # a driver's own connection error
        raise StoreUnavailable(
            f"cannot reach {describe(dsn)}: {type(exc).__name__}: {scrub(str(exc), dsn)}"
        ) from None


def _backing(module: str, names: tuple[str, ...], label: str) -> Any:
    """Import a backing lazily; `StoreUnavailable` if it (or a name) is not there yet."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise StoreUnavailable(f"the {label} backing is not available: {exc}") from None
    missing = [name for name in names if not hasattr(loaded, name)]
    if missing:
        raise StoreUnavailable(
            f"the {label} backing is not available in this build (missing {', '.join(missing)})"
        )
    return loaded


def _open_memory(clock: Clock, policy: QueuePolicy) -> Stores:
    memory = _backing(
        "durably.memory",
        ("MemoryStateStore", "MemoryWorkQueue", "MemoryCheckpointer", "MemoryScheduler"),
        "memory",
    )
    checkpointer = memory.MemoryCheckpointer()
    schedulers: dict[str, Any] = {}

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        # One scheduler per kind, shared by every caller of this process.
        if kind not in schedulers:
            schedulers[kind] = memory.MemoryScheduler(lease, kind)
        durable_type = getattr(memory, "MemoryDurable", None)
        if durable_type is not None:
            return durable_type(checkpointer, schedulers[kind])  # type: ignore[no-any-return]
        return SplitDurable(checkpointer, schedulers[kind])

    return Stores(
        backing="memory",
        location="memory (this process only)",
        state=memory.MemoryStateStore(clock=clock),
        queue=memory.MemoryWorkQueue(clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
    )


async def _open_sqlite(path: str, clock: Clock, policy: QueuePolicy) -> Stores:
    sqlite = _backing(
        "durably.sqlite",
        (
            "connect",
            "SqliteStateStore",
            "SqliteWorkQueue",
            "SqliteCheckpointer",
            "SqliteScheduler",
            "SqliteDurable",
        ),
        "SQLite",
    )
    database = await sqlite.connect(path)
    checkpointer = sqlite.SqliteCheckpointer(database)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = sqlite.SqliteScheduler(database, lease=lease, namespace=kind)
        return sqlite.SqliteDurable(checkpointer, scheduler)  # type: ignore[no-any-return]

    return Stores(
        backing="sqlite",
        location=f"sqlite {path}",
        state=sqlite.SqliteStateStore(database, clock=clock),
        queue=sqlite.SqliteWorkQueue(database, clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[database.close],
        database=database,
        sqlite_path=path,
    )


async def _open_postgres(dsn: str, clock: Clock, policy: QueuePolicy) -> Stores:
    postgres = _backing(
        "durably.postgres",
        (
            "PostgresStateStore",
            "PostgresWorkQueue",
            "PostgresCheckpointer",
            "PostgresScheduler",
            "PostgresDurable",
            "PostgresStoreSettings",
            "open_pool",
            "migrate",
        ),
        "PostgreSQL",
    )
    settings = postgres.PostgresStoreSettings(dsn=SecretStr(dsn), pool_size=4)
    pool = await postgres.open_pool(settings)
    checkpointer = postgres.PostgresCheckpointer(pool)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = postgres.PostgresScheduler(pool, lease=lease, namespace=kind)
        return postgres.PostgresDurable(checkpointer, scheduler)  # type: ignore[no-any-return]

    return Stores(
        backing="postgresql",
        location=describe(dsn),
        state=postgres.PostgresStateStore(pool, clock=clock),
        queue=postgres.PostgresWorkQueue(pool, clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[pool.close],
        database=pool,
    )


async def _open_redis(dsn: str, clock: Clock, policy: QueuePolicy) -> Stores:
    redis_backing = _backing(
        "durably.redis",
        ("RedisStateStore", "RedisWorkQueue", "RedisCheckpointer", "RedisScheduler"),
        "Redis",
    )
    client_module = _backing("redis.asyncio", ("from_url",), "Redis driver")
    client = client_module.from_url(dsn)
    try:
        await client.ping()
    except Exception:
        await client.aclose()
        raise
    checkpointer = redis_backing.RedisCheckpointer(client)

    def make_durable(kind: str, lease: float) -> Durable[Any]:
        scheduler = redis_backing.RedisScheduler(client, lease=lease, namespace=kind)
        durable_type = getattr(redis_backing, "RedisDurable", SplitDurable)
        return durable_type(checkpointer, scheduler)

    return Stores(
        backing="redis",
        location=describe(dsn),
        state=redis_backing.RedisStateStore(client, clock=clock),
        queue=redis_backing.RedisWorkQueue(client, clock=clock, policy=policy),
        checkpointer=checkpointer,
        make_durable=make_durable,
        closers=[client.aclose],
        database=client,
    )


def dsn_from(value: str | None) -> str:
    """The DSN given on the command line, else ``$DURABLY_DSN``; `DsnError` if neither."""
    dsn = value or os.environ.get(DSN_ENV)
    if not dsn:
        raise DsnError(f"no store named: pass --dsn (or set {DSN_ENV})")
    scheme_of(dsn)
    return dsn


def add_dsn(parser: argparse.ArgumentParser) -> None:
    """Add ``--dsn`` (default ``$DURABLY_DSN``)."""
    parser.add_argument(
        "--dsn",
        help=f"the store: sqlite:///file.db, postgresql://..., redis://... (default ${DSN_ENV})",
    )


@contextlib.asynccontextmanager
async def opened(
    args: argparse.Namespace, *, policy: QueuePolicy | None = None
) -> AsyncIterator[Stores]:
    """The stores ``args.dsn`` names, closed on exit."""
    stores = await open_stores(dsn_from(args.dsn), policy=policy)
    try:
        yield stores
    finally:
        await stores.close()


__all__ = [
    "DSN_ENV",
    "DsnError",
    "StoreUnavailable",
    "Stores",
    "UsageError",
    "add_dsn",
    "describe",
    "dsn_from",
    "open_stores",
    "opened",
    "scheme_of",
    "scrub",
    "sqlite_path",
]
