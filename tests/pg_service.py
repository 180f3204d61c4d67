"""PostgreSQL for the tests: a fresh database per test run (dropped at the end), a pool per
test over psycopg or asyncpg, and a fresh schema of tables per store.

The server keeps its durability settings (fsync, synchronous_commit); nothing here tunes
them away. When the server is unreachable the tests are skipped (or fail under
DURABLY_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from durably.postgres import StateTables, migrate
from tests.conftest import service_missing

ADMIN_DSN = os.environ.get("DURABLY_TEST_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres")
STATEMENT_TIMEOUT_MS = 30_000
POOL_SIZE = 12


def _dsn_for(database: str) -> str:
    # A URL both drivers accept, pointing at ``database`` instead of the admin one.
    parts = urlsplit(ADMIN_DSN)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of a database created for this test run (dropped after the session)."""
    return create_database()


def create_database(*settings: str) -> str:
    """Create a database for this test run (dropped after the session); its DSN. Skips
    (or fails, under DURABLY_REQUIRE_SERVICES=1) when the server is unreachable. Its
    sessions start with each of ``settings`` ("name = value", by ``ALTER DATABASE``)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        service_missing("PostgreSQL", "psycopg is not installed")
        raise
    name = f"durably_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        service_missing("PostgreSQL", type(error).__name__)
        raise
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        _CREATED.append(name)
        for setting in settings:
            admin.execute(f'ALTER DATABASE "{name}" SET {setting}')
    return _dsn_for(name)


# The databases this run created, dropped once the session has finished (`tests/conftest.py`,
# `pytest_sessionfinish`), not in the fixture's teardown: that runs inside the last test's
# timeout, and a dropped database is checkpointed first. The checkpoint syncs every file
# the run wrote (some 24,000: each test's tables are a schema of their own), which took
# 1.3 s on an idle machine and 61-72 s with both CPUs busy.
_CREATED: list[str] = []


def drop_created_databases() -> None:
    """Drop the databases this run created (`postgres_dsn`)."""
    if not _CREATED:
        return
    import psycopg

    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        while _CREATED:
            admin.execute(f'DROP DATABASE IF EXISTS "{_CREATED.pop()}" WITH (FORCE)')


async def open_pool(
    driver: str, dsn: str, *, size: int = POOL_SIZE, timeout_ms: int = STATEMENT_TIMEOUT_MS
) -> Any:
    """An open pool of ``driver`` ("psycopg" or "asyncpg") whose connections carry a
    statement_timeout of ``timeout_ms`` (0 = none, which `verify` refuses)."""
    if driver == "psycopg":
        from psycopg_pool import AsyncConnectionPool

        pool: Any = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=size,
            kwargs={"options": f"-c statement_timeout={timeout_ms}"},
            open=False,
        )
        await pool.open(wait=True)
        return pool
    import asyncpg

    return await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, server_settings={"statement_timeout": str(timeout_ms)}
    )


async def close_pool(pool: Any) -> None:
    """Close a pool made by `open_pool`."""
    await pool.close()


class Stores:
    """Fresh table sets over one pool, and the stores to close at teardown.

    With ``reuse``, a set of tables comes emptied from an earlier test when one is free, and
    is emptied and freed again at teardown: a migration is some sixty DDL statements (a
    third of a second on an idle server, a second or more under load), emptying a set is
    one statement. Only for tests that never change a schema (the conformance suites)."""

    def __init__(self, pool: Any, driver: str, *, reuse: bool = False) -> None:
        self.pool = pool
        self.driver = driver
        self._reuse = reuse
        self._closers: list[Any] = []
        self._made: list[StateTables] = []

    async def tables(self) -> StateTables:
        """An empty, migrated set of tables (a PostgreSQL schema no other test holds)."""
        if self._reuse and _EMPTIED:
            tables = _EMPTIED.pop()
        else:
            tables = StateTables(schema=f"t_{uuid.uuid4().hex[:16]}")
            await migrate(self.pool, tables)
            if self._reuse and not _FRESH:
                _FRESH.extend(await _relations(self.pool, tables))
        self._made.append(tables)
        return tables

    def track(self, store: Any) -> Any:
        """Close ``store`` (its listener) at teardown; returns it."""
        self._closers.append(store)
        return store

    async def close(self) -> None:
        for store in self._closers:
            await store.close()
        if self._reuse:
            for tables in self._made:
                if await _emptied(self.pool, tables):
                    _EMPTIED.append(tables)


# Emptied table sets free for the next test of `Stores(reuse=True)` (one database per run).
_EMPTIED: list[StateTables] = []
# The relations a fresh migration makes, by kind ("r" tables, "S" sequences, "i" indexes).
_FRESH: list[tuple[str, str]] = []


async def _relations(pool: Any, tables: StateTables) -> list[tuple[str, str]]:
    """The relations of ``tables``' schema: (kind, name), sorted."""
    from durably.postgres.executor import database_for

    async with database_for(pool).session(5.0) as session:
        rows = await session.fetch(
            "SELECT c.relkind::text, c.relname::text FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE n.nspname = '{_spliced(tables)}' ORDER BY 1, 2"
        )
    return [(str(kind), str(name)) for kind, name in rows]


async def _emptied(pool: Any, tables: StateTables) -> bool:
    """Empty ``tables`` (every row deleted, every sequence restarted) when it holds exactly
    the relations a fresh migration makes; False (the set is left alone) when it does not."""
    from durably.postgres.executor import database_for

    if await _relations(pool, tables) != _FRESH:
        return False
    schema = _spliced(tables)
    # Deleting a catalogued row counts its removal in a totals table (a trigger): the
    # second pass deletes what the first one's triggers wrote.
    async with database_for(pool).session(5.0) as session:
        await session.fetch(
            "DO $$ DECLARE r record; BEGIN FOR pass IN 1..2 LOOP "
            f"FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' LOOP "
            f"EXECUTE format('DELETE FROM %I.%I', '{schema}', r.tablename); END LOOP; "
            "END LOOP; "
            f"FOR r IN SELECT sequencename FROM pg_sequences WHERE schemaname = '{schema}' "
            f"LOOP EXECUTE format('ALTER SEQUENCE %I.%I RESTART', '{schema}', r.sequencename); "
            "END LOOP; END $$"
        )
    return True


def _spliced(tables: StateTables) -> str:
    """``tables``' schema name, checked safe to splice into a statement."""
    schema = tables.schema
    assert schema is not None
    assert schema.isidentifier(), schema
    return schema


@pytest.fixture(params=["psycopg", "asyncpg"])
def pg_driver(request: pytest.FixtureRequest) -> str:
    """Each PostgreSQL test runs over both drivers."""
    return str(request.param)


@pytest.fixture
async def pg_pool(postgres_dsn: str, pg_driver: str) -> AsyncIterator[Any]:
    pool = await open_pool(pg_driver, postgres_dsn)
    try:
        yield pool
    finally:
        await close_pool(pool)


@pytest.fixture
async def pg_stores(pg_pool: Any, pg_driver: str) -> AsyncIterator[Stores]:
    stores = Stores(pg_pool, pg_driver)
    try:
        yield stores
    finally:
        await stores.close()


class PostgresEffectKit:
    """Effects that bump a counter table in the checkpointer's own database."""

    def __init__(self, pool: Any, schema: str) -> None:
        self._pool = pool
        self._table = f'"{schema}".test_counters'

    @classmethod
    async def create(cls, stores: Stores) -> PostgresEffectKit:
        tables = await stores.tables()
        assert tables.schema is not None
        kit = cls(stores.pool, tables.schema)
        await kit._execute(
            f"CREATE TABLE IF NOT EXISTS {kit._table} (name text PRIMARY KEY, n bigint NOT NULL)"
        )
        return kit

    def bump(self, counter: str, value: object) -> Any:
        async def effect(handle: Any) -> object:
            await self._bump(handle, counter)
            return value

        return effect

    def bump_then_fail(self, counter: str) -> Any:
        async def effect(handle: Any) -> object:
            await self._bump(handle, counter)
            raise RuntimeError(f"effect on {counter} failed after its write")

        return effect

    async def count(self, counter: str) -> int:
        rows = await self._execute(f"SELECT n FROM {self._table} WHERE name = $1", counter)
        return int(rows[0][0]) if rows else 0

    async def _bump(self, handle: Any, counter: str) -> None:
        if type(handle).__module__.startswith("psycopg"):
            await handle.execute(
                f"INSERT INTO {self._table} (name, n) VALUES (%s, 1) "
                "ON CONFLICT (name) DO UPDATE SET n = test_counters.n + 1",
                (counter,),
            )
        else:
            await handle.execute(
                f"INSERT INTO {self._table} (name, n) VALUES ($1, 1) "
                "ON CONFLICT (name) DO UPDATE SET n = test_counters.n + 1",
                counter,
            )

    async def _execute(self, statement: str, *args: Any) -> Any:
        from durably.postgres.executor import database_for

        async with database_for(self._pool).session(5.0) as session:
            return await session.fetch(statement, *args)


@pytest.fixture
async def effect_kit(pg_stores: Stores) -> PostgresEffectKit:
    return await PostgresEffectKit.create(pg_stores)


def plan_nodes(explained: object) -> list[dict[str, Any]]:
    """Every node of a plan, as ``EXPLAIN (FORMAT JSON)`` returns it in its one cell (text
    or already decoded, by driver), root first."""
    document: Any = json.loads(explained) if isinstance(explained, str) else explained
    found: list[dict[str, Any]] = []
    pending = [document[0]["Plan"]]
    while pending:
        node = pending.pop(0)
        found.append(node)
        pending.extend(node.get("Plans", []))
    return found


__all__ = [
    "PostgresEffectKit",
    "Stores",
    "close_pool",
    "create_database",
    "effect_kit",
    "open_pool",
    "pg_driver",
    "pg_pool",
    "pg_stores",
    "plan_nodes",
    "postgres_dsn",
]
