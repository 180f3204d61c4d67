"""`AppConformance` on every backing: memory, SQLite, PostgreSQL and Redis, each test over
a store of its own (a fresh SQLite file, or the run's PostgreSQL database and a Redis
database flushed first)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durably.app import App
from durably.clock import Clock
from durably.testing.app import AppConformance, AppFactory
from tests.pg_service import postgres_dsn
from tests.redis_service import cluster_servers, flushed_database

__all__ = ["postgres_dsn"]

# Redis database index the App suite owns on the shared test server (flushed per test).
REDIS_DB = 7


# DSNs whose schema an App of this run has already migrated: later Apps only verify.
_MIGRATED: set[str] = set()


async def _apps(dsn: str) -> AsyncIterator[AppFactory]:
    made: list[App] = []

    async def make(clock: Clock, **options: Any) -> App:
        app = App(dsn, clock=clock, migrate=dsn not in _MIGRATED, **options)
        await app.stores()
        _MIGRATED.add(dsn)
        made.append(app)
        return app

    try:
        yield make
    finally:
        for app in made:
            await app.close()


async def _redis_slots(app: App) -> int:
    """The debounce slots ``app``'s Redis keeps: its keys, scanned on every node."""
    client: Any = (await app.stores()).database
    return len([key async for key in client.scan_iter(match="*debounce:*", count=1000)])


class TestMemoryApp(AppConformance):
    shares_stores = False
    store_in_process = True

    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        async for factory in _apps("memory://"):
            yield factory

    async def stored_slots(self, app: App) -> int:
        queue = (await app.stores()).queue
        return len(queue._tables.debounces)  # type: ignore[attr-defined]


class TestSqliteApp(AppConformance):
    # Every send and recv commits to disk (a few ms apiece on a shared machine): the
    # message cases use fewer, still far past where the cost per message used to grow.
    messages_sent = 5_000
    messages_consumed = 4_000
    # A send's work is this process's (its database thread's): timed as CPU, which the
    # disk's waits, shared with every process on the machine, do not move.
    store_in_process = True

    @pytest.fixture
    async def app_factory(self, tmp_path: Path) -> AsyncIterator[AppFactory]:
        self.path = tmp_path / "app.db"
        async for factory in _apps(f"sqlite:///{self.path}"):
            yield factory

    async def stored_slots(self, app: App) -> int:
        with sqlite3.connect(self.path) as db:
            (count,) = db.execute("SELECT count(*) FROM durably_debounces").fetchone()
        return int(count)


class TestPostgresApp(AppConformance):
    # One database for the run: each test registers kinds of its own (their default names
    # hold the test's name) and ids are fresh, so tests never serve each other's workflows.
    # Each send and each recv here is a committed transaction over a shared server (a few
    # ms apiece): the consume case uses fewer. The send case runs the full size: what a
    # long inbox costs PostgreSQL shows only past a few thousand messages (the planner's
    # idea of how many records one workflow holds).
    messages_consumed = 2_000

    @pytest.fixture
    async def app_factory(self, postgres_dsn: str) -> AsyncIterator[AppFactory]:
        async for factory in _apps(postgres_dsn):
            yield factory

    async def stored_slots(self, app: App) -> int:
        pool: Any = (await app.stores()).database
        async with pool.connection() as conn:
            cursor = await conn.execute("SELECT count(*) FROM durably_debounces")
            (count,) = await cursor.fetchone()
        return int(count)


class TestRedisApp(AppConformance):
    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        async for factory in _apps(await flushed_database(REDIS_DB)):
            yield factory

    async def stored_slots(self, app: App) -> int:
        return await _redis_slots(app)


class TestRedisClusterApp(AppConformance):
    # The App over a 3-master cluster through its DSN (redis+cluster://): every script
    # keeps to one slot, and tenants and kinds spread over the masters. The timing cases
    # run smaller (a cluster hop per call); the App's code is the same as standalone's.
    messages_sent = 2_000
    messages_consumed = 2_000

    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        nodes = cluster_servers()
        async for factory in _apps(
            "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in nodes) + "/"
        ):
            yield factory

    async def stored_slots(self, app: App) -> int:
        return await _redis_slots(app)
