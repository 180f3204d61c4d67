"""Failure mapping: pool exhaustion at once, missing schema names migrate, transient errors
retried on a fresh connection, and the DSN in no message."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import SecretStr

from durably.clock import ManualClock
from durably.errors import (
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
)
from durably.postgres import PostgresStateStore, PostgresStoreSettings, PostgresWorkQueue
from durably.postgres.executor import database_for
from durably.postgres.failures import classify
from durably.stores.runs import RunRecord, StateKey
from tests.pg_service import Stores, close_pool, open_pool

pytestmark = pytest.mark.postgres


def settings(**fields: Any) -> PostgresStoreSettings:
    return PostgresStoreSettings(dsn=SecretStr("unused"), **fields)


async def test_an_exhausted_pool_is_reported_at_once(
    postgres_dsn: str, pg_driver: str, pg_stores: Stores
) -> None:
    tables = await pg_stores.tables()
    pool = await open_pool(pg_driver, postgres_dsn, size=1)
    try:
        store = PostgresStateStore(
            pool, settings=settings(pool_timeout_seconds=0.2, max_attempts=5), tables=tables
        )
        async with database_for(pool).session(5.0):
            started = time.perf_counter()
            with pytest.raises(PoolExhaustedError):
                await store.get_run(StateKey(tenant="t", id="r"))
            assert time.perf_counter() - started < 1.0  # one wait, never retried
    finally:
        await close_pool(pool)


async def test_a_dropped_connection_is_retried_on_a_fresh_one(
    postgres_dsn: str, pg_driver: str, pg_stores: Stores
) -> None:
    tables = await pg_stores.tables()
    pool = await open_pool(pg_driver, postgres_dsn, size=1)
    try:
        store = PostgresStateStore(pool, clock=ManualClock(), tables=tables)
        await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
        async with database_for(pool).session(5.0) as session:
            pid = (await session.fetch("SELECT pg_backend_pid()"))[0][0]
        async with database_for(pg_stores.pool).session(5.0) as session:
            await session.fetch("SELECT pg_terminate_backend($1)", pid)
        stored = await store.get_run(StateKey(tenant="t", id="r"))
        assert stored is not None
        assert stored.version == 1
    finally:
        await close_pool(pool)


async def test_an_unreachable_server_is_unavailable_and_the_dsn_stays_secret(
    pg_driver: str,
) -> None:
    dsn = "postgresql://root:hunter2@127.0.0.1:1/nowhere"
    if pg_driver == "psycopg":
        from psycopg_pool import AsyncConnectionPool

        pool: Any = AsyncConnectionPool(dsn, min_size=0, max_size=1, open=False)
        await pool.open(wait=False)
    else:
        pytest.skip("asyncpg's create_pool connects eagerly; psycopg covers the mapping")
    try:
        queue = PostgresWorkQueue(
            pool, settings=settings(pool_timeout_seconds=0.3, max_attempts=2), tables=None
        )
        with pytest.raises((QueueUnavailableError, PoolExhaustedError)) as caught:
            await queue.stats()
        text = repr(caught.value) + str(caught.value) + repr(caught.value.__cause__)
        assert "hunter2" not in text
    finally:
        await pool.close()


async def test_a_missing_column_names_the_migration(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    async with database_for(pg_stores.pool).session(5.0) as session:
        await session.fetch(f'ALTER TABLE "{tables.schema}".durably_runs DROP COLUMN iterations')
    store = PostgresStateStore(pg_stores.pool, tables=tables)
    with pytest.raises(Exception, match="migrate"):
        await store.get_run(StateKey(tenant="t", id="r"))


async def test_a_value_over_the_size_limit_is_refused_before_it_is_sent(
    pg_stores: Stores,
) -> None:
    store = PostgresStateStore(
        pg_stores.pool, settings=settings(max_value_bytes=1000), tables=await pg_stores.tables()
    )
    big = RunRecord(run_id="r", tenant="t", agent_name="a", metadata={"blob": "x" * 2000})
    with pytest.raises(StatePersistenceError) as caught:
        await store.put_run(big)
    assert caught.value.reason == "too_large"
    assert not caught.value.retryable


def test_sqlstates_map_to_the_documented_kinds() -> None:
    def error(code: str | None) -> Exception:
        kind = type("OperationalError", (Exception,), {"__module__": "psycopg.errors"})
        failure: Exception = kind("x")
        setattr(failure, "sqlstate", code)  # noqa: B010 - a class built at runtime
        return failure

    assert classify(error("42P01")) == "configuration"
    assert classify(error("42703")) == "configuration"
    assert classify(error("40001")) == "contended"
    assert classify(error("40P01")) == "contended"
    assert classify(error("08006")) == "transient"
    assert classify(error("57P01")) == "transient"
    assert classify(error(None)) == "transient"
    assert classify(error("23505")) == "failed"
    assert classify(error("22P02")) == "invalid"
    assert classify(error("22P05")) == "invalid"
    data_error = type("DataError", (Exception,), {"__module__": "psycopg"})("NUL in text")
    assert classify(data_error) == "invalid"
    assert classify(ValueError("not a driver error")) is None
