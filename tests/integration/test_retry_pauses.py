"""Retries pause on the store's clock with an injectable jitter: with a `ManualClock` and a
fixed jitter, the pauses between tries are exactly the doubling sequence, on every backing
that retries (Redis and PostgreSQL against a port nobody listens on, SQLite against a write
lock another connection holds)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, StateKey
from durably.errors import StatePersistenceError
from durably.postgres import PostgresStateStore, PostgresStoreSettings
from durably.redis import RedisStateStore, RedisStoreSettings
from durably.sqlite import SqliteStateStore, SqliteStoreSettings, connect
from tests.redis_service import free_port

TRIES = {"max_attempts": 4, "backoff_seconds": 0.1, "jitter": lambda: 0.5}
# 0.1 doubling, each scaled by 0.5 + 0.5 * 0.5 = 0.75: one pause between two tries.
PAUSES = [0.075, 0.15, 0.3]


class RecordingClock(ManualClock):
    """A `ManualClock` that notes every pause it was asked to sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await super().sleep(seconds)


def run() -> RunRecord:
    return RunRecord(run_id="r", tenant="t", agent_name="a")


async def test_redis_retries_pause_on_the_stores_clock_by_the_doubling_sequence() -> None:
    clock = RecordingClock()
    nowhere = SecretStr(f"redis://127.0.0.1:{free_port()}/0")
    settings = RedisStoreSettings(dsn=nowhere, **TRIES)
    client = settings.client()
    store = RedisStateStore(client, clock=clock, settings=settings)
    try:
        with pytest.raises(StatePersistenceError) as gave_up:
            await store.put_run(run())
        assert gave_up.value.reason == "unavailable"
        assert clock.pauses == pytest.approx(PAUSES)
    finally:
        await client.aclose()


@pytest.mark.postgres
async def test_postgres_retries_pause_on_the_stores_clock_by_the_doubling_sequence() -> None:
    clock = RecordingClock()
    settings = PostgresStoreSettings(dsn=SecretStr("unused"), **TRIES)
    # asyncpg connects in the caller's task: every try meets the refused connection.
    pool = await asyncpg.create_pool(
        f"postgresql://root@127.0.0.1:{free_port()}/nowhere", min_size=0, max_size=1
    )
    store = PostgresStateStore(pool, clock=clock, settings=settings)
    try:
        with pytest.raises(StatePersistenceError) as gave_up:
            await store.get_run(StateKey(tenant="t", id="r"))
        assert gave_up.value.reason == "unavailable"
        assert clock.pauses == pytest.approx(PAUSES)
    finally:
        await pool.close()


async def test_sqlite_retries_pause_on_the_databases_clock_by_the_doubling_sequence(
    tmp_path: Path,
) -> None:
    clock = RecordingClock()
    path = str(tmp_path / "busy.db")
    settings = SqliteStoreSettings(path=path, busy_timeout_seconds=0.01, **TRIES)
    database = await connect(settings=settings, clock=clock)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another connection keeps the write lock
    try:
        with pytest.raises(StatePersistenceError) as gave_up:
            await SqliteStateStore(database).put_run(run())
        assert gave_up.value.reason == "contended"
        assert clock.pauses == pytest.approx(PAUSES)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await database.close()
