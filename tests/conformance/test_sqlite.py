"""All five conformance suites against the SQLite backing, a fresh file per store."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from durably.claimcheck.store import ClaimCheckStore
from durably.clock import Clock
from durably.sqlite import (
    Database,
    SqliteCheckpointer,
    SqliteClaimCheckStore,
    SqliteDurable,
    SqliteEffect,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    connect,
)
from durably.stores.runs import Scrubber, StateStore
from durably.stores.work import QueuePolicy, WorkQueue
from durably.stores.workflows import Checkpointer, Durable, Scheduler
from durably.testing import (
    CheckpointerConformance,
    ClaimCheckStoreConformance,
    DurableConformance,
    SchedulerConformance,
    StateStoreConformance,
    WorkQueueConformance,
)
from durably.testing.checkpointer import CheckpointerFactory
from durably.testing.claimcheck import ClaimCheckStoreFactory
from durably.testing.durable import DurableFactory
from durably.testing.queue import WorkQueueFactory
from durably.testing.scheduler import SchedulerFactory
from durably.testing.state import StateStoreFactory

Opener = Callable[[], Any]


class Files:
    """Opens a fresh database file per factory call and closes them all at teardown."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self.databases: list[Database] = []

    async def open(self) -> Database:
        database = await connect(self._directory / f"store-{len(self.databases)}.db")
        self.databases.append(database)
        return database

    async def close(self) -> None:
        for database in self.databases:
            await database.close()


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[Files]:
    opened = Files(tmp_path)
    yield opened
    await opened.close()


class SqliteEffectKit:
    """Effects that bump a counter table in the checkpointer's own database file."""

    def __init__(self, files: Files) -> None:
        self._files = files

    def bump(self, counter: str, value: object) -> SqliteEffect:
        def effect(cursor: sqlite3.Cursor) -> object:
            _bump(cursor, counter)
            return value

        return effect

    def bump_then_fail(self, counter: str) -> SqliteEffect:
        def effect(cursor: sqlite3.Cursor) -> object:
            _bump(cursor, counter)
            raise RuntimeError(f"effect on {counter} failed after its write")

        return effect

    async def count(self, counter: str) -> int:
        total = 0
        for database in self._files.databases:
            total += await database.transaction(
                lambda tx: _count(tx.cursor(), counter), write=False
            )
        return total


def _bump(cursor: sqlite3.Cursor, counter: str) -> None:
    cursor.execute("CREATE TABLE IF NOT EXISTS test_counters (name TEXT PRIMARY KEY, n INTEGER)")
    cursor.execute(
        "INSERT INTO test_counters (name, n) VALUES (?, 1) "
        "ON CONFLICT (name) DO UPDATE SET n = n + 1",
        (counter,),
    )


def _count(cursor: sqlite3.Cursor, counter: str) -> int:
    exists = cursor.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'test_counters'"
    ).fetchone()
    if exists is None:
        return 0
    row = cursor.execute("SELECT n FROM test_counters WHERE name = ?", (counter,)).fetchone()
    return 0 if row is None else int(row[0])


@pytest.fixture
def effect_kit(files: Files) -> SqliteEffectKit:
    return SqliteEffectKit(files)


@pytest.fixture
def state_store_factory(files: Files) -> StateStoreFactory:
    async def make(clock: Clock, scrub: Scrubber | None = None) -> StateStore:
        return SqliteStateStore(await files.open(), clock=clock, scrub=scrub)

    return make


@pytest.fixture
def work_queue_factory(files: Files) -> WorkQueueFactory:
    async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
        return SqliteWorkQueue(await files.open(), clock=clock, policy=policy)

    return make


@pytest.fixture
def checkpointer_factory(files: Files) -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return SqliteCheckpointer(await files.open())

    return make


@pytest.fixture
def scheduler_factory(files: Files) -> SchedulerFactory:
    async def make(lease: float) -> Scheduler:
        return SqliteScheduler(await files.open(), lease=lease)

    return make


@pytest.fixture
def durable_factory(files: Files) -> DurableFactory:
    async def make() -> Durable[Any]:
        database = await files.open()
        return SqliteDurable(SqliteCheckpointer(database), SqliteScheduler(database, lease=30.0))

    return make


class TestSqliteStateStore(StateStoreConformance):
    pass


class TestSqliteWorkQueue(WorkQueueConformance):
    pass


class TestSqliteCheckpointer(CheckpointerConformance):
    pass


class TestSqliteScheduler(SchedulerConformance):
    pass


class TestSqliteDurable(DurableConformance):
    pass


@pytest.fixture
def claim_store_factory(files: Files) -> ClaimCheckStoreFactory:
    async def make(clock: Clock) -> ClaimCheckStore:
        return SqliteClaimCheckStore(await files.open(), clock=clock)

    return make


class TestSqliteClaimCheckStore(ClaimCheckStoreConformance):
    pass
